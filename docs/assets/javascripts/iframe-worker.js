// A Worker run in a hidden iframe, for pages opened from disk (file://), where browsers refuse
// `new Worker(url)`: mkdocs-material's search runs its worker script in it. mkdocs.yml lists this
// file as the theme's polyfill, in place of the one the offline plugin would load from the
// network (unpkg.com/iframe-worker/shim); the search worker looks for `IFrameWorker` by that name.
(function () {
  if (location.protocol !== "file:") return;

  class IFrameWorker extends EventTarget {
    constructor(url) {
      super();
      const frame = document.createElement("iframe");
      frame.hidden = true;
      document.body.appendChild(frame);
      this.frame = frame;
      this.pending = [];  // messages posted before the worker's script has run
      const inner = frame.contentWindow;
      // the worker's own postMessage() reaches the page, as from a real worker
      inner.postMessage = (data) =>
        this.dispatchEvent(new MessageEvent("message", { data: structuredClone(data) }));
      const script = inner.document.createElement("script");
      script.src = url;
      script.onload = () => {
        const pending = this.pending;
        this.pending = null;
        pending.forEach((data) => this.deliver(data));
      };
      script.onerror = () => this.dispatchEvent(new Event("error"));
      inner.document.head.appendChild(script);
    }

    postMessage(data) {
      if (this.pending) this.pending.push(data);
      else this.deliver(data);
    }

    deliver(data) {
      const inner = this.frame.contentWindow;
      inner.dispatchEvent(new inner.MessageEvent("message", { data: structuredClone(data) }));
    }

    terminate() {
      this.frame.remove();
    }
  }

  window.IFrameWorker = IFrameWorker;
  window.Worker = IFrameWorker;
})();
