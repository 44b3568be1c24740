import { useEffect, useState } from 'react';

/** Time left until `to` (ISO), ticking each second; "ended" once it passed. */
export function Countdown({ to, onEnd }: { to: string; onEnd?: () => void }) {
  const end = Date.parse(to);
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (now >= end) {
      onEnd?.();
      return;
    }
    const timer = setTimeout(() => setNow(Date.now()), 1000 - (Date.now() % 1000));
    return () => clearTimeout(timer);
  }, [now, end, onEnd]);
  const left = Math.max(0, Math.ceil((end - now) / 1000));
  const text = left === 0 ? 'ended' : `${Math.floor(left / 3600) > 0 ? `${Math.floor(left / 3600)}h ` : ''}${Math.floor((left % 3600) / 60)}m ${left % 60}s left`;
  return (
    <time className="countdown" dateTime={to}>
      {text}
    </time>
  );
}
