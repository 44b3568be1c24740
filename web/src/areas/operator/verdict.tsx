import type { EarningVerdict } from '@gpufarm/shared';
import { when } from '../../lib/format';
import { EarningBadge } from '../../ui/badges';
import { CodeSpans } from '../../ui/code-spans';

/** The earning verdict in words: earning or not, why, since when, and the fix when there is one. */
export function Verdict({ verdict, large = false }: { verdict: EarningVerdict; large?: boolean }) {
  return (
    <div className={large ? 'verdict verdict-large' : 'verdict'}>
      <p className="verdict-line">
        <EarningBadge earning={verdict.earning} /> <strong>
          <CodeSpans text={verdict.reason} />
        </strong>
        {verdict.since ? <span className="muted"> since {when(verdict.since)}</span> : null}
      </p>
      {verdict.fix ? (
        <p className="verdict-fix">
          <span className="verdict-fix-label">Fix:</span> <CodeSpans text={verdict.fix} />
        </p>
      ) : null}
    </div>
  );
}
