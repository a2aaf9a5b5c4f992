// JSON checked in the browser before it is sent: the API takes data and
// metadata as JSON objects, so text that does not parse is refused here
// with the parser's own message, and nothing is sent.

/** checkObject parses text as a JSON object; the error names field and says what the parser said. */
export function checkObject(field: string, text: string, blankOk: boolean): { ok: true; bytes: Uint8Array } | { ok: false; error: string } {
  const t = text.trim();
  if (t === "") return blankOk ? { ok: true, bytes: new Uint8Array() } : { ok: false, error: `${field}: must be a JSON object, got nothing` };
  let v: unknown;
  try {
    v = JSON.parse(t);
  } catch (e) {
    return { ok: false, error: `${field} is not valid JSON: ${(e as Error).message}` };
  }
  if (v === null && blankOk) return { ok: true, bytes: new Uint8Array() };
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    return { ok: false, error: `${field}: must be a JSON object, got ${v === null ? "null" : Array.isArray(v) ? "an array" : typeof v}` };
  }
  return { ok: true, bytes: new TextEncoder().encode(t) };
}
