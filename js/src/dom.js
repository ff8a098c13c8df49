// Tiny DOM helpers: build HTML and SVG elements declaratively, without a framework.

const SVG_NS = "http://www.w3.org/2000/svg";

function apply(el, props) {
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : value);
    else if (key === "testid") el.setAttribute("data-testid", value);
    else if (key === "style" && typeof value === "object") {
      for (const [name, v] of Object.entries(value)) el.style.setProperty(name, v);
    }
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key in PROPERTIES) el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
}

// Set as DOM properties rather than attributes (form state).
const PROPERTIES = { value: 1, checked: 1, selected: 1, disabled: 1 };

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An HTML element: `h("div", {class: "x", testid: "y"}, "text", child)`. */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  apply(el, props);
  return append(el, children);
}

/** An SVG element, same signature as `h`. */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, props);
  return append(el, children);
}

/** Replace all children of `el`. */
export function replaceChildren(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}
