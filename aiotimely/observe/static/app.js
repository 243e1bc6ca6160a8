// The live dataflow page: lays out the graph of each dataflow with dagre when the graph changes, and writes
// the state of every frame (frontiers, capabilities held, queues, rates, what holds time back) into it in place.
"use strict";
(() => {
  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 230, LINE = 14, PAD = 7, CHARS = 36;
  const page = window.aiotimely = { frames: 0, layouts: 0, graphId: null };
  let nodes = new Map();     // operator id -> its drawn parts
  let headings = new Map();  // dataflow index -> the frontier in its heading

  function svg(tag, attrs, parent) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (parent) parent.appendChild(e);
    return e;
  }

  function html(tag, attrs, text, parent) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function setText(e, text) {  // long text is cut on screen; the whole is the tooltip
    const shown = text.length > CHARS ? text.slice(0, CHARS - 1) + "…" : text;
    if (e.textContent !== shown) e.textContent = shown;
    if (e.dataset.full !== text) e.dataset.full = text;
  }

  const portNode = (scope, kind, port) => scope + "/" + kind + port;
  const depth = id => id.split(".").length;

  // -- the graph: laid out only when it changes ------------------------------------------------

  function layout(flow) {
    const g = new dagre.graphlib.Graph({ compound: true, multigraph: true });
    g.setGraph({ rankdir: "TB", nodesep: 22, ranksep: 34, edgesep: 12, marginx: 12, marginy: 12 });
    g.setDefaultEdgeLabel(() => ({}));
    const scopes = new Set(flow.scopes.map(s => s.id));
    const root = flow.scopes.find(s => s.parent === null).id;
    const parentOf = scope => scope === root ? null : "scope:" + scope;
    for (const s of flow.scopes) {
      if (s.id === root) continue;
      g.setNode("scope:" + s.id, { kind: "scope", scope: s, width: 60, height: 30 });
      if (parentOf(s.parent)) g.setParent("scope:" + s.id, parentOf(s.parent));
      for (const [kind, count] of [["in", s.inputs], ["out", s.outputs]]) {
        for (let p = 0; p < count; p++) {
          const id = portNode(s.id, kind, p);
          g.setNode(id, { kind: "port", label: kind + " " + p, width: 20, height: 20 });
          g.setParent(id, "scope:" + s.id);
        }
      }
    }
    for (const op of flow.operators) {
      const lines = 3 + op.inputs.length + (op.stages && op.stages.length > 1 ? 1 : 0);
      g.setNode(op.id, { kind: "op", op, width: WIDTH, height: 2 * PAD + LINE * lines });
      if (parentOf(op.scope)) g.setParent(op.id, parentOf(op.scope));
    }
    flow.edges.forEach((e, i) => {
      const v = e.source === e.scope ? portNode(e.scope, "in", e.source_port)
        : scopes.has(e.source) ? portNode(e.source, "out", e.source_port) : e.source;
      const w = e.target === e.scope ? portNode(e.scope, "out", e.target_port)
        : scopes.has(e.target) ? portNode(e.target, "in", e.target_port) : e.target;
      const label = e.feedback ? "loop" : e.pact !== "pipeline" ? e.pact : "";
      g.setEdge(v, w, { edge: e, label, width: label.length * 6, height: label ? 12 : 0 }, "e" + i);
    });
    dagre.layout(g);
    return g;
  }

  function marker(defs, id, color) {
    const m = svg("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 8, markerHeight: 8,
                              markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" }, defs);
    svg("path", { d: "M0,0 L10,5 L0,10 z", fill: color }, m);
  }

  function draw(flow, g, box) {
    const size = g.graph();
    const root = svg("svg", { width: Math.ceil(size.width), height: Math.ceil(size.height), class: "graph",
                              "data-dataflow": flow.index }, box);
    const defs = svg("defs", {}, root);
    marker(defs, "arrow", "#8a94a6");
    marker(defs, "arrow-exchange", "#d9822b");
    marker(defs, "arrow-loop", "#7a5cc7");
    const clusters = g.nodes().filter(v => g.node(v).kind === "scope")
      .sort((a, b) => depth(a) - depth(b));
    for (const v of clusters) {
      const n = g.node(v), s = n.scope;
      const c = svg("g", { class: "scope" + (s.iterative ? " iterative" : ""), "data-id": s.id }, root);
      svg("rect", { x: n.x - n.width / 2, y: n.y - n.height / 2, width: n.width, height: n.height }, c);
      const t = svg("text", { x: n.x - n.width / 2 + 8, y: n.y - n.height / 2 + 12 }, c);
      t.textContent = s.name + (s.iterative ? " (iterative)" : " (region)");
    }
    for (const e of g.edges()) {
      const d = g.edge(e), kind = d.edge.feedback ? "loop" : d.edge.pact;
      const p = svg("g", { class: "edge " + kind, "data-source": d.edge.source, "data-target": d.edge.target }, root);
      svg("path", { d: "M" + d.points.map(pt => pt.x + "," + pt.y).join(" L") }, p);
      if (d.label) {
        const t = svg("text", { x: d.x - d.width / 2, y: d.y + 4 }, p);
        t.textContent = d.label;
      }
    }
    for (const v of g.nodes()) {
      const n = g.node(v);
      if (n.kind === "port") {
        const p = svg("g", { class: "port", "data-id": v }, root);
        svg("circle", { cx: n.x, cy: n.y, r: 9 }, p);
        const t = svg("text", { x: n.x, y: n.y + 3, "text-anchor": "middle" }, p);
        t.textContent = n.label;
      } else if (n.kind === "op") {
        nodes.set(v, drawOperator(n, root));
      }
    }
  }

  function drawOperator(n, parent) {
    const op = n.op;
    const g = svg("g", { class: "op", "data-id": op.id, "data-name": op.name,
                         transform: `translate(${n.x - n.width / 2},${n.y - n.height / 2})` }, parent);
    const title = svg("title", {}, g);
    title.textContent = `${op.name} (${op.id})`;
    svg("rect", { width: n.width, height: n.height }, g);
    let y = PAD + 10;
    const line = cls => { const t = svg("text", { x: 8, y, class: cls }, g); y += LINE; return t; };
    setText(line("name"), op.name);
    if (op.stages && op.stages.length > 1) setText(line("detail stages"), op.stages.join(" → "));
    const inputs = op.inputs.map((pact, port) => {
      const t = line("detail in");
      t.dataset.port = port;
      return t;
    });
    return { op, g, title, inputs, caps: line("detail caps"), rate: line("detail rate") };
  }

  function relayout(graph) {
    const box = document.getElementById("graphs");
    box.replaceChildren();
    nodes = new Map();
    headings = new Map();
    if (!graph.dataflows.length) {
      html("p", { class: "empty" }, "No dataflow is running here (a complete dataflow leaves the page).", box);
    }
    for (const flow of graph.dataflows) {
      const section = html("section", { class: "dataflow", "data-index": flow.index }, undefined, box);
      const h = html("h2", {}, `dataflow '${flow.name}' `, section);
      headings.set(flow.index, html("span", { class: "frontier" }, "", h));
      draw(flow, layout(flow), section);
    }
    page.layouts += 1;
  }

  // -- the state: written in place at every frame ----------------------------------------------

  const times = f => f.length === 0 ? "complete" : f.length === 1 ? f[0] : "{" + f.join(", ") + "}";

  function perWorker(states, pick) {  // one text if every worker agrees, else each worker's
    const texts = states.map(x => pick(x.s));
    if (texts.every(t => t === texts[0])) return texts[0] || "";
    return states.map((x, i) => `w${x.worker} ${texts[i]}`).join(" | ");
  }

  function held(states) {
    const parts = [];
    for (const { worker, s } of states) {
      s.capabilities.forEach((caps, port) => {
        if (caps.length) parts.push(`${caps.join(", ")}${s.capabilities.length > 1 ? " on out " + port : ""} @w${worker}`);
      });
    }
    return parts;
  }

  function rates(inputs, ss) {  // records per second, summed over the workers
    const rate = key => ss.reduce((n, s) => n + s[key], 0).toFixed(1);
    return inputs ? `${rate("rate_in")} rec/s in · ${rate("rate_out")} out` : `${rate("rate_out")} rec/s out`;
  }

  function update(frame) {
    const where = document.getElementById("where");
    where.textContent = `process ${frame.process} of ${frame.processes} · ` +
      `workers ${frame.workers.map(w => w.worker).join(", ")} of ${frame.workers.length ? frame.workers[0].peers : 0}`;
    const states = new Map();
    const frontiers = new Map();
    for (const w of frame.workers) {
      for (const f of w.dataflows) {
        if (!frontiers.has(f.index)) frontiers.set(f.index, []);
        frontiers.get(f.index).push({ worker: w.worker, s: f });
        for (const [id, s] of Object.entries(f.operators)) {
          if (!states.has(id)) states.set(id, []);
          states.get(id).push({ worker: w.worker, s });
        }
      }
    }
    for (const [index, span] of headings) {
      const fs = frontiers.get(index) || [];
      span.textContent = fs.length ? "at " + perWorker(fs, s => times(s.frontier)) : "complete";
    }
    for (const [id, node] of nodes) {
      const ss = states.get(id) || [];
      const holds = ss.some(x => x.s.holds_back);
      const done = ss.every(x => x.s.done);
      node.g.classList.toggle("holds-back", holds);
      node.g.classList.toggle("done", done);
      node.inputs.forEach((t, port) => {
        const pact = node.op.inputs[port] === "pipeline" ? "" : ` (${node.op.inputs[port]})`;
        const frontier = perWorker(ss, s => s.inputs[port] ? times(s.inputs[port].frontier) : "");
        const queued = ss.reduce((n, x) => n + (x.s.inputs[port] ? x.s.inputs[port].queued_records : 0), 0);
        setText(t, `in ${port}${pact}: ${frontier}${queued ? " · queued " + queued : ""}`);
      });
      const caps = held(ss);
      setText(node.caps, caps.length ? "holds " + caps.join("; ") : "holds nothing");
      setText(node.rate, done ? "done" : rates(node.op.inputs.length, ss.map(x => x.s)));
      const why = ss.flatMap(x => x.s.blockers);
      const title = `${node.op.name} (${id})` + (why.length ? "\n" + why.join("\n") : "");
      if (node.title.textContent !== title) node.title.textContent = title;
    }
    updatePanel(frame, frontiers);
  }

  function updatePanel(frame, frontiers) {
    const names = new Map();
    for (const flow of frame.graph.dataflows) for (const op of flow.operators) names.set(op.id, op.name);
    const holding = document.getElementById("holding");
    holding.replaceChildren();
    const body = document.querySelector("#operators tbody");
    body.replaceChildren();
    for (const w of frame.workers) {
      for (const f of w.dataflows) {
        for (const [id, s] of Object.entries(f.operators)) {
          if (s.holds_back) {
            const li = html("li", { class: "holds", "data-id": id, "data-worker": w.worker },
                            `${names.get(id) || id} (${id}) on worker ${w.worker}, dataflow '${f.name}'`, holding);
            for (const b of s.blockers) html("span", { class: "why" }, b, li);
          }
          const row = html("tr", { "data-id": id, "data-worker": w.worker,
                                   class: s.holds_back ? "holds-back" : s.done ? "done" : "" }, undefined, body);
          const caps = s.capabilities.map(c => c.join(", ")).filter(Boolean).join(" | ");
          const cells = [id, names.get(id) || "", "w" + w.worker,
                         s.inputs.map(i => times(i.frontier)).join(" | "),
                         String(s.inputs.reduce((n, i) => n + i.queued_records, 0)), caps,
                         (s.inputs.length ? s.rate_in.toFixed(1) : "–") + " / " + s.rate_out.toFixed(1)];
          for (const c of cells) html("td", {}, c, row);
        }
      }
    }
    if (!holding.children.length) {
      html("li", {}, frontiers.size ? "nothing: every dataflow is waiting for input" : "nothing is running", holding);
    }
    const workers = document.getElementById("workers");
    workers.replaceChildren();
    for (const w of frame.workers) {
      html("li", { "data-worker": w.worker },
           `worker ${w.worker}: ${w.rounds} rounds, ${w.operators_run} operator runs, ` +
           `${w.dataflows.length} dataflow(s) running`, workers);
    }
  }

  // -- the websocket -----------------------------------------------------------------------------

  function show(frame) {
    page.frames += 1;
    if (frame.graph.id !== page.graphId) {
      relayout(frame.graph);
      page.graphId = frame.graph.id;
    }
    update(frame);
  }

  function connect() {
    const status = document.getElementById("status");
    const url = new URL("ws", location.href);  // relative: the page may sit under a proxy's prefix
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(url);
    ws.onopen = () => { status.textContent = "live"; status.className = "live"; };
    ws.onmessage = event => show(JSON.parse(event.data));
    ws.onclose = () => {
      status.textContent = "disconnected: retrying";
      status.className = "closed";
      setTimeout(connect, 1000);
    };
  }

  connect();
})();
