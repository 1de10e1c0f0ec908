// Building the page from data without ever parsing data as HTML: every string becomes a
// text node or an attribute value, so entry content (written by any agent) stays text.

const SVG_NS = "http://www.w3.org/2000/svg";
// The bidirectional embedding, override and isolate controls: they can show text in another
// order than it reads (docs/security.md). Stored strings are cleaned already; this also
// covers older rows and echoed input. The direction marks U+200E, U+200F, U+061C stay.
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;

function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(
      child instanceof Node ? child : document.createTextNode(String(child).replace(BIDI_CONTROLS, "")),
    );
  }
}

function assign(element, attributes) {
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(element.dataset, value);
    } else if (name === "href" && !safeHref(String(value))) {
      continue;
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

// Links the console makes are its own hash routes; nothing else (no javascript: URLs).
function safeHref(value) {
  return value.startsWith("#");
}

/** An HTML element: h("a", {href: "#/x"}, "text", child, ...). */
export function h(tag, attributes, ...children) {
  const element = document.createElement(tag);
  assign(element, attributes);
  append(element, children);
  return element;
}

/** An SVG element, the same way. */
export function s(tag, attributes, ...children) {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else if (name === "href" && !safeHref(String(value))) {
      continue;
    } else {
      element.setAttribute(name, String(value));
    }
  }
  append(element, children);
  return element;
}

/** Replace the children of ``element`` with ``children``. */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

export function clip(text, length) {
  const value = String(text ?? "");
  return value.length > length ? value.slice(0, length - 1) + "…" : value;
}

export function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function number(value, digits = 2) {
  return value === null || value === undefined ? "—" : Number(value).toFixed(digits);
}
