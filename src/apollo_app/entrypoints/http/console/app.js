// The Apollo console: a hash router over the views, the token form and the message line.

import { UNAUTHENTICATED, setToken, token } from "./api.js";
import { fill } from "./dom.js";
import { activityView, disputesView, entryView, expertiseView, onMessage, onRoute, searchView } from "./views.js";

const VIEWS = {
  search: searchView,
  entry: entryView,
  disputes: disputesView,
  expertise: expertiseView,
  activity: activityView,
};

const message = document.getElementById("message");
const view = document.getElementById("view");

function show(text, kind = "error") {
  message.className = kind;
  fill(message, text);
  message.hidden = false;
}

function clear() {
  message.hidden = true;
  message.replaceChildren();
}

function parse(hash) {
  const [path, query = ""] = hash.replace(/^#\/?/, "").split("?");
  const [name, ...rest] = path.split("/");
  const params = Object.fromEntries(new URLSearchParams(query));
  if (name === "entry" && rest.length) params.id = decodeURIComponent(rest.join("/"));
  return { name: VIEWS[name] ? name : "search", params };
}

async function render() {
  const { name, params } = parse(location.hash);
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.view === name);
  }
  await VIEWS[name](view, params);
}

async function navigate() {
  clear();
  await render();
}

function showToken() {
  fill(document.getElementById("token-state"), token() ? "token in use (this tab only)" : "no token");
}

/** The API answered 401: it has tokens, so the field asks for one (no loopback default). */
function tokenRequired() {
  document.getElementById("token").placeholder = "required: paste a bearer token";
  fill(document.getElementById("token-state"), token() ? "token refused" : "a token is required");
}

function setUp() {
  const form = document.getElementById("token-form");
  const input = document.getElementById("token");
  input.value = token();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(input.value);
    showToken();
    navigate();
  });
  document.getElementById("token-forget").addEventListener("click", () => {
    input.value = "";
    setToken("");
    showToken();
    navigate();
  });
  showToken();
  window.addEventListener(UNAUTHENTICATED, tokenRequired);
  onMessage(show);
  onRoute(render);
  window.addEventListener("hashchange", navigate);
  navigate();
}

setUp();
