// The relations of one entry as a small SVG graph: incoming on the left, the entry in the
// middle, outgoing on the right; each node links to its entry page.

import { clip, s } from "./dom.js";

const WIDTH = 960;
const ROW = 46;
const NODE_W = 240;
const NODE_H = 34;
const DRAWN = 12;

function node(x, y, label, status, href, title) {
  const group = s("g", { class: `node status-${status}` },
    s("title", {}, title),
    s("rect", { x: x - NODE_W / 2, y: y - NODE_H / 2, width: NODE_W, height: NODE_H, rx: 6 }),
    s("text", { x, y: y + 4, "text-anchor": "middle" }, clip(label, 34)),
  );
  return href ? s("a", { href }, group) : group;
}

function edge(x1, y1, x2, y2, label, type) {
  const mx = (x1 + x2) / 2;
  const my = (y1 + y2) / 2;
  return s("g", { class: `edge rel-${type}` },
    s("line", { x1, y1, x2, y2, "marker-end": "url(#arrow)" }),
    s("text", { x: mx, y: my - 4, "text-anchor": "middle" }, label),
  );
}

/** An SVG element drawing ``entry`` with its ``relations`` (LinkedEntry objects): at
 * most ``DRAWN`` each way (the list under the graph has them all). */
export function relationGraph(entry, relations) {
  const outgoing = relations.filter((r) => r.direction === "out").slice(0, DRAWN);
  const incoming = relations.filter((r) => r.direction === "in").slice(0, DRAWN);
  const rows = Math.max(outgoing.length, incoming.length, 1);
  const height = rows * ROW + 20;
  const middle = height / 2;
  const left = NODE_W / 2 + 4;
  const right = WIDTH - NODE_W / 2 - 4;
  const center = WIDTH / 2;
  const y = (i, n) => middle + (i - (n - 1) / 2) * ROW;
  const svg = s("svg", {
    class: "graph", viewBox: `0 0 ${WIDTH} ${height}`, width: WIDTH, height,
    role: "img", "aria-label": `${incoming.length} incoming and ${outgoing.length} outgoing relations`,
  },
    s("defs", {},
      s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        s("path", { d: "M 0 0 L 10 5 L 0 10 z" }))),
  );
  incoming.forEach((r, i) => {
    const ry = y(i, incoming.length);
    svg.append(edge(left + NODE_W / 2, ry, center - NODE_W / 2, middle, r.relation_type, r.relation_type));
  });
  outgoing.forEach((r, i) => {
    const ry = y(i, outgoing.length);
    svg.append(edge(center + NODE_W / 2, middle, right - NODE_W / 2, ry, r.relation_type, r.relation_type));
  });
  incoming.forEach((r, i) => {
    svg.append(node(left, y(i, incoming.length), r.content, r.status, `#/entry/${r.id}`, r.content));
  });
  outgoing.forEach((r, i) => {
    svg.append(node(right, y(i, outgoing.length), r.content, r.status, `#/entry/${r.id}`, r.content));
  });
  svg.append(node(center, middle, entry.content, entry.status, null, entry.content));
  return svg;
}
