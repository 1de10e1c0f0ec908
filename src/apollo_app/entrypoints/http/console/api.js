// The API as the console calls it: every datum comes from /api/apollo with the bearer token
// the user entered (kept in sessionStorage: gone when the tab closes).

const TOKEN = "apollo.console.token";
const REFUSED = "apollo.console.admin-refused";
export const PREFIX = "/api/apollo";
/** Dispatched on window when the API answers 401: it wants a token this tab lacks. */
export const UNAUTHENTICATED = "apollo:unauthenticated";

export class ApiError extends Error {
  constructor(status, type, message, field) {
    super(message);
    this.status = status;
    this.type = type;
    this.field = field;
  }

  /** What the user reads: the status, what it means here, and the API's own message. */
  describe() {
    const meaning = {
      401: "Not authenticated — enter a valid bearer token above",
      403: "Forbidden — your token's role may not do this",
      404: "Not found (or not visible to you)",
      409: "Conflict — not in a state this applies to",
      503: "The store is unavailable right now",
    }[this.status];
    const head = meaning ? `${this.status} ${meaning}` : `${this.status || "Error"}`;
    return `${head}: ${this.message}`;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN) || "";
}

export function setToken(value) {
  const trimmed = (value || "").trim();
  if (trimmed) sessionStorage.setItem(TOKEN, trimmed);
  else sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(REFUSED);
}

/** Whether the API refused an admin action to the current token. */
export function adminRefused() {
  return sessionStorage.getItem(REFUSED) === "1";
}

function headers(extra) {
  const found = { Accept: "application/json", ...extra };
  const value = token();
  if (value) found.Authorization = `Bearer ${value}`;
  return found;
}

async function failure(response) {
  let type = "http_error";
  let message = response.statusText || "request failed";
  let field = null;
  try {
    const body = await response.json();
    if (body && body.error) ({ type, message, field } = body.error);
  } catch {
    // not JSON: keep the status text
  }
  return new ApiError(response.status, type, message, field);
}

/** Call an API route; resolves to the JSON body, rejects with ApiError. */
export async function call(method, path, { body, query, admin = false } = {}) {
  let url = PREFIX + path;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) params.set(k, v);
    url += `?${params}`;
  }
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  let response;
  try {
    response = await fetch(url, init);
  } catch (err) {
    throw new ApiError(0, "network", `cannot reach Apollo (${err.message})`, null);
  }
  if (!response.ok) {
    const error = await failure(response);
    if (admin && error.status === 403) sessionStorage.setItem(REFUSED, "1");
    if (error.status === 401) window.dispatchEvent(new CustomEvent(UNAUTHENTICATED));
    throw error;
  }
  return response.json();
}

/** The Prometheus exposition of /metrics, parsed into {name: [{labels, value}]}. */
export async function metrics() {
  let response;
  try {
    response = await fetch("/metrics", { headers: headers({ Accept: "text/plain" }) });
  } catch (err) {
    throw new ApiError(0, "network", `cannot reach Apollo (${err.message})`, null);
  }
  if (!response.ok) throw await failure(response);
  return parseExposition(await response.text());
}

export function parseExposition(text) {
  const series = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const pair of (match[3] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]] = pair[2];
    (series[match[1]] ||= []).push({ labels, value: Number(match[4]) });
  }
  return series;
}

export const entryPath = (id) => `/entries/${encodeURIComponent(id)}`;
