/** Text from the server whose `backticked` parts are commands or paths: shown as code, as a terminal reader sees them. */
export function CodeSpans({ text }: { text: string }) {
  const parts = text.split('`');
  // An unpaired backtick is left as it is.
  if (parts.length % 2 === 0) return <>{text}</>;
  return <>{parts.map((part, i) => (i % 2 === 1 ? <code key={i}>{part}</code> : part))}</>;
}
