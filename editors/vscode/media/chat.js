// The chat view's DOM side. It keeps nothing but what it shows: the
// extension sends transcript items (whole, by index) as they change.
// @ts-check
(function () {
  // @ts-ignore acquireVsCodeApi is provided by the webview host
  const vscode = acquireVsCodeApi();
  const transcript = /** @type {HTMLElement} */ (document.getElementById("transcript"));
  const prompt = /** @type {HTMLTextAreaElement} */ (document.getElementById("prompt"));
  const send = /** @type {HTMLButtonElement} */ (document.getElementById("send"));
  const stop = /** @type {HTMLButtonElement} */ (document.getElementById("stop"));
  const title = /** @type {HTMLElement} */ (document.getElementById("title"));
  const usage = /** @type {HTMLElement} */ (document.getElementById("usage"));
  const mode = /** @type {HTMLSelectElement} */ (document.getElementById("mode"));
  /** @type {HTMLElement[]} */
  let nodes = [];
  let busy = false;

  const STATUS = { pending: "pending", in_progress: "running", completed: "done", failed: "failed" };
  const PLAN_MARK = { pending: "○", in_progress: "◐", completed: "●" };

  /** @param {string} tag @param {string} [cls] @param {string} [text] */
  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  /** @param {any[]} content @param {number} index @param {HTMLElement} into */
  function renderContent(content, index, into) {
    let diff = 0;
    for (const c of content) {
      if (c.type === "diff") {
        const d = diff++;
        const row = el("div", "buttons");
        const b = el("button", "link", `Show diff: ${c.path}`);
        b.addEventListener("click", () => vscode.postMessage({ type: "showDiff", index, diff: d }));
        row.appendChild(b);
        into.appendChild(row);
      } else if (c.type === "content" && c.content && c.content.type === "text") {
        into.appendChild(el("pre", "", c.content.text));
      } else if (c.type === "terminal") {
        into.appendChild(el("div", "", `terminal ${c.terminalId}`));
      }
    }
  }

  /** @param {any} item @param {number} index */
  function render(item, index) {
    switch (item.kind) {
      case "user":
      case "agent":
        return el("div", `item ${item.kind}`, item.text);
      case "thought": {
        const d = el("details", "item thought");
        d.appendChild(el("summary", "", "Thinking"));
        d.appendChild(el("div", "", item.text));
        return d;
      }
      case "tool": {
        const box = el("div", "item tool");
        const head = el("div", "head", item.title);
        head.appendChild(el("span", `status ${item.status}`, STATUS[item.status] || item.status));
        box.appendChild(head);
        if (item.locations.length > 0) box.appendChild(el("div", "locations", item.locations.join(", ")));
        renderContent(item.content, index, box);
        return box;
      }
      case "permission": {
        const box = el("div", `item permission${item.outcome ? " settled" : ""}`);
        box.appendChild(el("div", "head", `Allow: ${item.title}?`));
        renderContent(item.content.filter((/** @type {any} */ c) => c.type === "diff"), index, box);
        if (item.outcome) {
          const chosen = item.options.find((/** @type {any} */ o) => o.optionId === item.outcome);
          box.appendChild(el("div", "", chosen ? `Answered: ${chosen.name}` : "Dismissed"));
        } else {
          const row = el("div", "buttons");
          const ordered = [...item.options].sort((a, b) => (a.kind.startsWith("allow") ? 0 : 1) - (b.kind.startsWith("allow") ? 0 : 1));
          for (const o of ordered) {
            const b = el("button", o.kind.startsWith("allow") ? "" : "secondary", o.name);
            b.addEventListener("click", () => vscode.postMessage({ type: "permission", id: item.requestId, optionId: o.optionId }));
            row.appendChild(b);
          }
          box.appendChild(row);
        }
        return box;
      }
      case "plan": {
        const box = el("div", "item plan", "Plan");
        const ul = el("ul");
        for (const e of item.entries) ul.appendChild(el("li", e.status, `${PLAN_MARK[e.status] || ""} ${e.content}`));
        box.appendChild(ul);
        return box;
      }
      case "stop":
        return el("div", "item stop", item.stopReason === "end_turn" ? "" : `stopped: ${item.stopReason}`);
      default:
        return el("div", `item ${item.kind}`, item.text);
    }
  }

  /** @param {number} index @param {any} item */
  function upsert(index, item) {
    const stick = transcript.scrollTop + transcript.clientHeight >= transcript.scrollHeight - 20;
    const node = render(item, index);
    const old = nodes[index];
    if (old) {
      // Keep an expanded thought expanded while it streams.
      if (old instanceof HTMLDetailsElement && node instanceof HTMLDetailsElement) node.open = old.open;
      old.replaceWith(node);
    } else {
      transcript.appendChild(node);
    }
    nodes[index] = node;
    if (stick) transcript.scrollTop = transcript.scrollHeight;
  }

  /** @param {any} state */
  function setState(state) {
    busy = state.busy;
    stop.hidden = !busy;
    send.disabled = busy;
    title.textContent = state.title || (state.sessionId ? state.sessionId : "New session");
    if (state.usage) {
      const pct = state.usage.size > 0 ? Math.round((100 * state.usage.used) / state.usage.size) : 0;
      const cost = state.usage.cost ? ` · ${state.usage.cost.amount.toFixed(4)} ${state.usage.cost.currency}` : "";
      usage.textContent = `context ${pct}%${cost}`;
    } else {
      usage.textContent = "";
    }
    mode.hidden = state.modes.length === 0;
    mode.replaceChildren(...state.modes.map((/** @type {any} */ m) => {
      const o = /** @type {HTMLOptionElement} */ (el("option", "", m.name));
      o.value = m.id;
      o.selected = m.id === state.modeId;
      return o;
    }));
  }

  function submit() {
    const text = prompt.value.trim();
    if (!text || busy) return;
    prompt.value = "";
    vscode.postMessage({ type: "prompt", text });
  }

  send.addEventListener("click", submit);
  stop.addEventListener("click", () => vscode.postMessage({ type: "cancel" }));
  mode.addEventListener("change", () => vscode.postMessage({ type: "setMode", modeId: mode.value }));
  prompt.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      submit();
    }
  });

  window.addEventListener("message", (event) => {
    const m = event.data;
    switch (m.type) {
      case "reset":
        transcript.replaceChildren();
        nodes = [];
        m.items.forEach((/** @type {any} */ item, /** @type {number} */ i) => upsert(i, item));
        break;
      case "items":
        for (const c of m.changes) upsert(c.index, c.item);
        break;
      case "state":
        setState(m.state);
        break;
    }
  });

  vscode.postMessage({ type: "ready" });
})();
