/** An answer of the gpufarm API: the status, the headers and the body (JSON parsed, else the text, null when empty). */
export interface HttpAnswer<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

/**
 * One call of the public API with an API key: a JSON body out, the answer back whatever its
 * status. Redirects are not followed, so a download's 302 and its integrity headers reach the
 * caller. Network failures reject (fetch's own error).
 */
export async function apiRequest<T = unknown>(
  baseUrl: string,
  apiKey: string,
  method: string,
  path: string,
  options: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<HttpAnswer<T>> {
  const { body, headers = {} } = options;
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    redirect: 'manual',
    headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, headers: res.headers, body: parsed as T };
}
