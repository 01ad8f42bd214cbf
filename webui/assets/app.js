// The page of a sous run or daemon (docs/UI.md). It reads the API token
// from the URL's fragment, which the browser never sends to the server,
// and sends it as a Bearer header. Everything shown goes into the page as
// text (textContent), never as markup: a process that prints
// <script>alert(1)</script> shows those characters.
"use strict";
(() => {
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const MAX_TAIL = 64 * 1024; // characters of output kept per process, as the server keeps
  const MAX_MESSAGES = 200;   // messages kept per session
  const $ = (id) => document.getElementById(id);

  let model = null;     // what the page shows; rebuilt from each state event
  let retry = 1000;     // reconnect delay, doubling up to 10 s
  let clockOffset = 0;  // server time minus this browser's

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function api(path, opts) {
    opts = opts || {};
    opts.headers = Object.assign({ Authorization: "Bearer " + token }, opts.headers || {});
    opts.cache = "no-store";
    return fetch(path, opts);
  }

  function setStatus(text, cls) {
    const s = $("status");
    s.textContent = text;
    s.className = "status" + (cls ? " " + cls : "");
  }

  // The event stream: fetch, not EventSource, which cannot send the
  // Authorization header.
  async function connect() {
    if (!token) {
      setStatus("no token in this page's address: open the URL sous printed (…/#token=…)", "lost");
      return;
    }
    setStatus(model ? "reconnecting…" : "connecting…", model ? "lost" : "");
    let resp;
    try {
      resp = await api("/api/events");
    } catch (e) {
      return lost();
    }
    if (resp.status === 401) {
      setStatus("wrong token: open the URL sous printed (…/#token=…)", "lost");
      return;
    }
    if (!resp.ok || !resp.body) return lost();
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = block.split("\n").filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(l.startsWith("data: ") ? 6 : 5)).join("\n");
          if (data) {
            handle(JSON.parse(data));
            retry = 1000;
          }
        }
      }
    } catch (e) {
      // the stream broke: reconnect below
    }
    lost();
  }

  function lost() {
    if (model && model.end) {
      setStatus(endText(model.end) + " · sous has exited", model.end.exit_code === 0 ? "ended-ok" : "ended-bad");
      return; // nothing will answer again
    }
    setStatus("connection lost; reconnecting…", "lost");
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 10000);
  }

  function endText(end) {
    let t = "run ended: " + end.status + " (exit code " + end.exit_code + ")";
    if (end.error) t += ": " + end.error;
    return t;
  }

  function handle(ev) {
    switch (ev.event) {
      case "state": return loadState(ev.state);
      case "start": model.title = ev.recipe; $("title").textContent = ev.recipe; return;
      case "spawn":
        return addProc({ id: ev.id, command: ev.command, host: ev.host, pid: ev.pid, state: "running",
          started: ev.time, exit_code: null, output: [] });
      case "output": return appendOutput(model.procs.get(ev.id), ev.stream, ev.data);
      case "exit": return exitProc(model.procs.get(ev.id), ev.exit_code, ev.time);
      case "agent": return agentMessage(ev.session, ev.dir, ev.message);
      case "approval": return decisionNote(ev);
      case "approvals": return renderApprovals(ev.approvals);
      case "end":
        model.end = { status: ev.status, exit_code: ev.exit_code, error: ev.error, time: ev.time };
        return showEnd();
    }
  }

  function loadState(st) {
    clockOffset = Date.parse(st.now) - Date.now();
    model = { kind: st.kind, title: st.title, procs: new Map(), sessions: new Map(), cards: new Map(), end: st.end };
    $("kind").textContent = st.kind === "daemon" ? "sous daemon" : "sous run";
    $("title").textContent = st.kind === "daemon" ? "" : st.title;
    document.title = st.kind === "daemon" ? "sous daemon" : "sous · " + st.title;
    $("processes").replaceChildren();
    $("sessions").replaceChildren();
    $("approvals").replaceChildren();
    $("sessions-section").hidden = st.kind === "daemon"; // a daemon does not know the runs' sessions
    for (const p of st.processes) addProc(p);
    for (const s of st.sessions) addSession(s);
    renderApprovals(st.approvals);
    showEnd();
  }

  function showEnd() {
    if (model.end) setStatus(endText(model.end), model.end.exit_code === 0 ? "ended-ok" : "ended-bad");
    else setStatus("live", "");
  }

  function counts() {
    $("processes-count").textContent = model.procs.size ? "(" + model.procs.size + ")" : "";
    $("processes-empty").hidden = model.procs.size > 0;
    $("sessions-count").textContent = model.sessions.size ? "(" + model.sessions.size + ")" : "";
    $("sessions-empty").hidden = model.sessions.size > 0;
  }

  // Processes.

  function addProc(p) {
    const old = model.procs.get(p.id);
    if (old) old.el.remove(); // a reused id: the new process replaces it
    const card = el("details", "card proc");
    card.open = p.state === "running";
    const sum = el("summary");
    const proc = Object.assign({}, p, { el: card, size: 0 });
    proc.idEl = sum.appendChild(el("span", "id", p.id));
    sum.appendChild(el("span", "cmd", (p.command || []).join(" ")));
    proc.stateEl = sum.appendChild(el("span", "state"));
    proc.elapsedEl = sum.appendChild(el("span", "meta elapsed"));
    if (p.host) sum.appendChild(el("span", "meta", p.host));
    if (p.pid) sum.appendChild(el("span", "meta", "pid " + p.pid));
    card.appendChild(sum);
    proc.pre = card.appendChild(el("pre", "output"));
    if (p.output_truncated) proc.pre.appendChild(el("span", "meta", "… (older output not kept)\n"));
    model.procs.set(p.id, proc);
    $("processes").prepend(card);
    for (const piece of p.output || []) appendOutput(proc, piece.stream, piece.data);
    showProcState(proc);
    counts();
  }

  function appendOutput(proc, stream, data) {
    if (!proc || !data) return;
    const pre = proc.pre;
    const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 4;
    const last = pre.lastChild;
    if (last && last.dataset && last.dataset.stream === stream) {
      last.textContent += data;
    } else {
      const span = el("span", stream === "stderr" ? "stderr" : "", data);
      span.dataset.stream = stream;
      pre.appendChild(span);
    }
    proc.size += data.length;
    while (proc.size > MAX_TAIL && pre.firstChild) {
      const first = pre.firstChild;
      const over = proc.size - MAX_TAIL;
      const len = first.textContent.length;
      if (len <= over) {
        first.remove();
        proc.size -= len;
      } else {
        first.textContent = first.textContent.slice(over);
        proc.size -= over;
      }
    }
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  function exitProc(proc, code, at) {
    if (!proc) return;
    proc.state = "exited";
    proc.exit_code = code;
    proc.ended = at;
    showProcState(proc);
  }

  function showProcState(proc) {
    if (proc.state === "running") {
      proc.stateEl.textContent = "running";
      proc.stateEl.className = "state state-running";
    } else {
      proc.stateEl.textContent = proc.exit_code === -1 ? "killed" : "exit " + proc.exit_code;
      proc.stateEl.className = "state " + (proc.exit_code === 0 ? "state-ok" : "state-failed");
    }
    showElapsed(proc);
  }

  function showElapsed(proc) {
    const end = proc.ended ? Date.parse(proc.ended) : Date.now() + clockOffset;
    proc.elapsedEl.textContent = duration(end - Date.parse(proc.started));
  }

  function duration(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
  }

  setInterval(() => {
    if (!model) return;
    for (const p of model.procs.values()) if (p.state === "running") showElapsed(p);
  }, 1000);

  // Sessions.

  function addSession(s) {
    const card = el("details", "card session");
    card.open = true;
    const sum = el("summary");
    sum.appendChild(el("span", "id", s.id));
    const sess = { id: s.id, el: card, turns: s.turns || 0, cost: s.cost_usd || 0, model: s.model || "" };
    sess.metaEl = sum.appendChild(el("span", "meta"));
    card.appendChild(sum);
    sess.list = card.appendChild(el("div", "msgs"));
    if (s.messages_dropped) sess.list.appendChild(el("div", "meta", "… (older messages not kept)"));
    model.sessions.set(s.id, sess);
    $("sessions").prepend(card);
    for (const m of s.messages || []) renderMessage(sess, m.dir, m.message);
    showSession(sess);
    counts();
    return sess;
  }

  function showSession(sess) {
    const parts = [];
    if (sess.model) parts.push(sess.model);
    parts.push(sess.turns + (sess.turns === 1 ? " turn" : " turns"));
    parts.push("$" + sess.cost.toFixed(4));
    sess.metaEl.textContent = parts.join(" · ");
  }

  function agentMessage(id, dir, msg) {
    if (!id || !msg) return;
    const sess = model.sessions.get(id) || addSession({ id: id, messages: [] });
    if (msg.type === "result") {
      sess.turns++;
      sess.cost += msg.total_cost_usd || 0;
    }
    if (msg.type === "system" && msg.model) sess.model = msg.model;
    renderMessage(sess, dir, msg);
    showSession(sess);
  }

  function decisionNote(ev) {
    const sess = ev.session && model.sessions.get(ev.session);
    if (!sess) return;
    const row = el("div", "msg decision" + (ev.decision === "deny" ? " error" : ""));
    row.appendChild(el("span", "kind", ev.decision === "deny" ? "denied" : "allowed"));
    let text = ev.tool + (ev.summary ? ": " + ev.summary : "") + " (by " + ev.by + ")";
    if (ev.message) text += " — " + ev.message;
    row.appendChild(el("span", "text", text));
    addRow(sess, row);
  }

  function addRow(sess, row) {
    const list = sess.list;
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 4;
    list.appendChild(row);
    while (list.childElementCount > MAX_MESSAGES) list.firstChild.remove();
    if (atBottom) list.scrollTop = list.scrollHeight;
  }

  function message(kind, cls, text) {
    const row = el("div", "msg " + cls);
    row.appendChild(el("span", "kind", kind));
    if (text !== undefined) row.appendChild(el("span", "text", text));
    return row;
  }

  function textOf(content) {
    if (typeof content === "string") return content;
    if (Array.isArray(content)) return content.map((b) => (b && b.type === "text" ? b.text : "")).filter(Boolean).join("\n");
    return "";
  }

  function renderMessage(sess, dir, msg) {
    if (!msg || typeof msg !== "object") return;
    const content = msg.message && msg.message.content;
    switch (msg.type) {
      case "system":
        if (msg.subtype === "init") addRow(sess, message("session", "system", "started" + (msg.model ? " · " + msg.model : "")));
        return;
      case "assistant":
        for (const b of Array.isArray(content) ? content : []) {
          if (b.type === "text" && b.text) addRow(sess, message("agent", "text", b.text));
          if (b.type === "tool_use") {
            const row = message("tool use", "tool-use");
            row.appendChild(el("span", "name", b.name));
            const input = b.input || {};
            const what = input.command || input.file_path || input.path || input.pattern || input.url || "";
            if (what) row.appendChild(el("span", "text", " " + what));
            row.appendChild(el("pre", "", JSON.stringify(input, null, 2)));
            addRow(sess, row);
          }
        }
        return;
      case "user":
        if (dir === "out") {
          const t = textOf(content);
          if (t) addRow(sess, message("prompt", "prompt", t));
          return;
        }
        for (const b of Array.isArray(content) ? content : []) {
          if (b.type !== "tool_result") continue;
          const row = message(b.is_error ? "tool error" : "tool result", b.is_error ? "tool-result error" : "tool-result");
          row.appendChild(el("pre", "", textOf(b.content)));
          addRow(sess, row);
        }
        return;
      case "result": {
        const parts = [msg.subtype || "done"];
        if (typeof msg.total_cost_usd === "number") parts.push("$" + msg.total_cost_usd.toFixed(4));
        if (typeof msg.duration_ms === "number") parts.push(duration(msg.duration_ms));
        const bad = msg.is_error || String(msg.subtype || "").startsWith("error");
        addRow(sess, message("turn", "result" + (bad ? " error" : ""), parts.join(" · ")));
        return;
      }
    }
  }

  // Approvals.

  function renderApprovals(list) {
    const keep = new Set(list.map((a) => a.id));
    for (const [id, card] of model.cards) {
      if (!keep.has(id)) {
        card.remove();
        model.cards.delete(id);
      }
    }
    for (const a of list) if (!model.cards.has(a.id)) $("approvals").appendChild(approvalCard(a));
    $("approvals-count").textContent = list.length ? "(" + list.length + ")" : "";
    $("approvals-empty").hidden = list.length > 0;
  }

  function approvalCard(a) {
    const card = el("div", "card approval");
    card.dataset.id = a.id;
    const head = card.appendChild(el("div", "meta"));
    head.textContent = [a.kind === "privileged" ? "privileged command" : a.tool,
      a.session ? "session " + a.session : "", a.recipe || "", a.id].filter(Boolean).join(" · ");
    card.appendChild(el("div", "what", a.summary || a.tool));
    if (a.description && a.description !== a.summary) card.appendChild(el("div", "description", a.description));
    if (a.input && Object.keys(a.input).length) {
      const d = card.appendChild(el("details"));
      d.appendChild(el("summary", "meta", "input"));
      d.appendChild(el("pre", "", JSON.stringify(a.input, null, 2)));
    }
    const msg = card.appendChild(el("input"));
    msg.type = "text";
    msg.className = "message";
    msg.placeholder = "message (optional; the agent reads it with a denial)";
    msg.maxLength = 2000;
    const allow = card.appendChild(el("button", "allow", "Allow"));
    card.appendChild(document.createTextNode(" "));
    const deny = card.appendChild(el("button", "deny", "Deny"));
    const result = card.appendChild(el("div", "answer-error"));
    const answer = async (decision) => {
      allow.disabled = deny.disabled = true;
      result.textContent = "";
      let resp;
      try {
        resp = await api("/api/approvals/" + encodeURIComponent(a.id), {
          method: "POST", headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ decision: decision, message: msg.value }),
        });
      } catch (e) {
        result.textContent = "not sent: " + e;
        allow.disabled = deny.disabled = false;
        return;
      }
      if (resp.ok) {
        result.className = "meta";
        result.textContent = (decision === "allow" ? "allowed" : "denied") + "; waiting for the run…";
        return;
      }
      let text = "HTTP " + resp.status;
      try { text = (await resp.json()).error || text; } catch (e) { /* keep the status */ }
      result.textContent = text;
      if (resp.status !== 409 && resp.status !== 404) allow.disabled = deny.disabled = false;
    };
    allow.addEventListener("click", () => answer("allow"));
    deny.addEventListener("click", () => answer("deny"));
    model.cards.set(a.id, card);
    return card;
  }

  connect();
})();
