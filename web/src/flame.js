// Flame graph of folded call stacks ({"outer;inner;leaf": samples}), drawn as SVG.
//
// Frames stack bottom-up from a root "all"; a frame's width is proportional to its samples;
// children sit left to right, hottest first. Every drawn frame is
// <g class="frame"><title>name — n samples (p%)</title><rect/><text>name</text></g>, so the
// function names are in the DOM (for search, screen readers and tests), even in frames too
// narrow to print them. Hover shows a tooltip; a click zooms into the frame (its ancestors stay
// full width); "Reset zoom" or a click on "all" goes back. Beside the graph, the hottest
// functions by self samples (time spent in the function itself, the leaves of the stacks);
// clicking one, or typing in the search box, highlights every frame of that function.
//
// Usage: const fg = new FlameGraph(container); fg.setStacks(stacks); — setStacks can be called
// again with newer counts (a live job) and keeps the zoom and the search. Defines
// window.FlameGraph; no dependencies.
'use strict';

(() => {
  const kFrameHeight = 18;
  const kCharWidth = 6.7;  // 11px monospace
  const kMinWidthPx = 0.3;  // narrower frames (and what sits on them) are not drawn
  const kHotCount = 12;

  function Escape(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({
      '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
    })[c]);
  }

  function FormatCount(n) { return Math.round(n).toLocaleString('en-US'); }

  function FormatShare(part, whole) {
    if (!(whole > 0)) return '—';
    const p = (100 * part) / whole;
    return (p >= 10 ? p.toFixed(1) : p.toFixed(2)) + '%';
  }

  // A stable warm colour per function name, as flamegraph.pl does, so a function keeps its
  // colour across refreshes; frames that spend ≥ 5% of all samples in themselves are red.
  function FrameColour(node, total) {
    if (total > 0 && node.self / total >= 0.05) return 'hsl(4, 78%, 56%)';
    let h = 0;
    for (let i = 0; i < node.name.length; i++) h = (h * 31 + node.name.charCodeAt(i)) >>> 0;
    const hue = 18 + (h % 38);
    const light = 58 + ((h >>> 8) % 14);
    return `hsl(${hue}, 85%, ${light}%)`;
  }

  function BuildTree(stacks) {
    const root = { name: 'all', value: 0, self: 0, depth: 0, parent: null, children: new Map() };
    for (const [stack, count] of Object.entries(stacks || {})) {
      const n = Number(count);
      if (!(n > 0) || !Number.isFinite(n)) continue;
      let node = root;
      root.value += n;
      for (const frame of String(stack).split(';')) {
        if (frame === '') continue;
        let child = node.children.get(frame);
        if (!child) {
          child = { name: frame, value: 0, self: 0, depth: node.depth + 1, parent: node,
                    children: new Map() };
          node.children.set(frame, child);
        }
        child.value += n;
        node = child;
      }
      node.self += n;
    }
    return root;
  }

  function PathOf(node) {
    const path = [];
    for (let n = node; n && n.parent; n = n.parent) path.unshift(n.name);
    return path;
  }

  function FindPath(root, path) {
    let node = root;
    for (const name of path) {
      const next = node.children.get(name);
      if (!next) return node;  // the deepest frame of the old zoom that still exists
      node = next;
    }
    return node;
  }

  function SortedChildren(node) {
    return [...node.children.values()].sort((a, b) => b.value - a.value || (a.name < b.name ? -1 : 1));
  }

  class FlameGraph {
    constructor(container) {
      this.container_ = container;
      this.root_ = BuildTree({});
      this.zoom_path_ = [];
      this.search_ = '';
      this.drawn_ = [];
      this.width_ = 0;

      container.classList.add('flame');
      container.innerHTML = `
        <div class="flame-tools">
          <label>Search function <input type="search" class="flame-search" placeholder="name or part of it"></label>
          <button type="button" class="flame-reset" disabled>Reset zoom</button>
          <span class="flame-info muted" aria-live="polite"></span>
        </div>
        <div class="flame-layout">
          <div class="flame-svg"></div>
          <div><h3>Hottest functions</h3><p class="muted" style="margin:0 0 4px">self samples: time spent in the function itself</p>
          <ol class="hot-list"></ol></div>
        </div>`;
      this.svg_box_ = container.querySelector('.flame-svg');
      this.info_ = container.querySelector('.flame-info');
      this.hot_ = container.querySelector('.hot-list');
      this.reset_ = container.querySelector('.flame-reset');
      this.search_input_ = container.querySelector('.flame-search');
      this.tooltip_ = document.createElement('div');
      this.tooltip_.className = 'tooltip';
      this.tooltip_.hidden = true;
      document.body.appendChild(this.tooltip_);

      this.reset_.addEventListener('click', () => this.Zoom(this.root_));
      this.search_input_.addEventListener('input', () => {
        this.search_ = this.search_input_.value.trim();
        this.Highlight();
      });
      this.svg_box_.addEventListener('click', (e) => {
        const node = this.NodeAt(e.target);
        if (node) this.Zoom(node);
      });
      this.svg_box_.addEventListener('mousemove', (e) => this.ShowTooltip(e));
      this.svg_box_.addEventListener('mouseleave', () => { this.tooltip_.hidden = true; });
      this.hot_.addEventListener('click', (e) => this.PickHot(e.target));
      this.hot_.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); this.PickHot(e.target); }
      });
      if (window.ResizeObserver) {
        this.resize_ = new ResizeObserver(() => {
          if (this.svg_box_.clientWidth !== this.width_) this.Render();
        });
        this.resize_.observe(this.svg_box_);
      }
    }

    // Removes the tooltip and observers; call when the page goes away.
    Destroy() {
      if (this.resize_) this.resize_.disconnect();
      this.tooltip_.remove();
    }

    get total() { return this.root_.value; }

    setStacks(stacks) {
      this.root_ = BuildTree(stacks);
      this.Render();
    }

    Zoom(node) {
      this.zoom_path_ = PathOf(node);
      this.Render();
    }

    PickHot(target) {
      const li = target.closest('li[data-name]');
      if (!li) return;
      const name = li.dataset.name;
      this.search_ = this.search_ === name ? '' : name;
      this.search_input_.value = this.search_;
      this.Highlight();
    }

    NodeAt(target) {
      const g = target.closest && target.closest('g.frame');
      return g ? this.drawn_[Number(g.dataset.i)] : null;
    }

    ShowTooltip(e) {
      const node = this.NodeAt(e.target);
      if (!node) { this.tooltip_.hidden = true; return; }
      const zoom = FindPath(this.root_, this.zoom_path_);
      let text = `${node.name}\n${FormatCount(node.value)} samples, ${FormatShare(node.value, this.total)} of all`;
      if (zoom !== this.root_ && zoom.value > 0 && node.depth >= zoom.depth) {
        text += `, ${FormatShare(node.value, zoom.value)} of ${zoom.name}`;
      }
      if (node.self > 0) text += `\nself: ${FormatCount(node.self)} (${FormatShare(node.self, this.total)})`;
      this.tooltip_.textContent = text;
      this.tooltip_.style.whiteSpace = 'pre-line';
      this.tooltip_.hidden = false;
      const pad = 14;
      const w = this.tooltip_.offsetWidth;
      const x = e.clientX + pad + w > window.innerWidth ? e.clientX - pad - w : e.clientX + pad;
      this.tooltip_.style.left = `${Math.max(0, x)}px`;
      this.tooltip_.style.top = `${e.clientY + pad}px`;
    }

    Render() {
      const root = this.root_;
      const total = root.value;
      this.width_ = this.svg_box_.clientWidth;
      const width = Math.max(this.width_, 300);
      if (!(total > 0)) {
        this.svg_box_.innerHTML = '<p class="muted">No call stacks were sampled for this job.</p>';
        this.hot_.innerHTML = '';
        this.info_.textContent = '';
        this.reset_.disabled = true;
        return;
      }
      const zoom = FindPath(root, this.zoom_path_);
      this.zoom_path_ = PathOf(zoom);
      this.reset_.disabled = zoom === root;

      // Lay out: the zoomed frame's ancestors full width, its subtree scaled to the width.
      const drawn = [];
      const boxes = [];
      let max_depth = 0;
      for (let n = zoom.parent; n; n = n.parent) {
        drawn.push(n);
        boxes.push({ x: 0, w: width, node: n, dim: true });
      }
      const scale = width / zoom.value;
      const stack = [{ node: zoom, x: 0 }];
      while (stack.length) {
        const { node, x } = stack.pop();
        const w = node.value * scale;
        if (w < kMinWidthPx) continue;
        drawn.push(node);
        boxes.push({ x, w, node, dim: false });
        if (node.depth > max_depth) max_depth = node.depth;
        let cx = x;
        for (const child of SortedChildren(node)) {
          stack.push({ node: child, x: cx });
          cx += child.value * scale;
        }
      }
      const height = (max_depth + 1) * kFrameHeight;
      const parts = [];
      for (let i = 0; i < boxes.length; i++) {
        const { x, w, node, dim } = boxes[i];
        drawn[i] = node;
        const y = height - (node.depth + 1) * kFrameHeight;
        const title = `${node.name} — ${FormatCount(node.value)} samples (${FormatShare(node.value, total)})`;
        const max_chars = Math.floor((w - 6) / kCharWidth);
        let label = '';
        if (max_chars >= 3) {
          label = node.name.length <= max_chars ? node.name : node.name.slice(0, max_chars - 2) + '..';
        }
        parts.push(
          `<g class="frame${dim ? ' dim' : ''}" data-i="${i}" data-name="${Escape(node.name)}">` +
          `<title>${Escape(title)}</title>` +
          `<rect x="${x.toFixed(2)}" y="${y}" width="${Math.max(w, 0.5).toFixed(2)}" height="${kFrameHeight - 1}" rx="2" fill="${FrameColour(node, total)}"/>` +
          (label ? `<text x="${(x + 3).toFixed(2)}" y="${y + kFrameHeight - 5}">${Escape(label)}</text>` : '') +
          '</g>');
      }
      this.drawn_ = drawn;
      this.svg_box_.innerHTML =
        `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
        `role="img" aria-label="Flame graph of ${FormatCount(total)} samples">${parts.join('')}</svg>`;

      // The hottest functions by self samples, over the whole graph.
      const self_by_name = new Map();
      const walk = [root];
      while (walk.length) {
        const n = walk.pop();
        if (n.self > 0 && n !== root) self_by_name.set(n.name, (self_by_name.get(n.name) || 0) + n.self);
        for (const c of n.children.values()) walk.push(c);
      }
      const hot = [...self_by_name.entries()].sort((a, b) => b[1] - a[1]).slice(0, kHotCount);
      this.hot_.innerHTML = hot.map(([name, self]) =>
        `<li tabindex="0" data-name="${Escape(name)}" title="${Escape(name)}"><span class="n">${Escape(name)}</span>` +
        `<span class="num">${FormatShare(self, total)}</span></li>`).join('');
      this.Highlight();
    }

    Highlight() {
      const q = this.search_.toLowerCase();
      let matched = 0;
      for (const g of this.svg_box_.querySelectorAll('g.frame')) {
        const node = this.drawn_[Number(g.dataset.i)];
        const hit = q !== '' && node.name.toLowerCase().includes(q);
        g.classList.toggle('match', hit);
      }
      if (q !== '') {
        // Samples under a matching frame, each counted once (the outermost match).
        const walk = [this.root_];
        while (walk.length) {
          const n = walk.pop();
          if (n !== this.root_ && n.name.toLowerCase().includes(q)) { matched += n.value; continue; }
          for (const c of n.children.values()) walk.push(c);
        }
      }
      const zoom = FindPath(this.root_, this.zoom_path_);
      let info = `${FormatCount(this.total)} samples`;
      if (zoom !== this.root_) info += ` · zoomed into ${zoom.name}`;
      if (q !== '') info += ` · “${this.search_}” in ${FormatShare(matched, this.total)} of samples`;
      this.info_.textContent = info;
    }
  }

  window.FlameGraph = FlameGraph;
})();
