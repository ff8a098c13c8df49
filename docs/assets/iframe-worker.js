// A Web Worker for pages opened from file:// (docs site, issue 29). Chromium refuses
// `new Worker("file:///...")`, so Material's search could not start there; its offline plugin
// expects the iframe-worker shim from unpkg.com, which this site must not fetch. This is the
// same idea, local: the worker script runs in a hidden same-origin iframe, and messages cross
// between the page and the iframe as they would between a page and a worker. Only what the
// search worker uses is provided: postMessage, the "message" event, terminate.
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  class IframeWorker extends EventTarget {
    constructor(url) {
      super();
      const frame = document.createElement("iframe");
      frame.hidden = true;
      frame.srcdoc = "<!doctype html><title>worker</title>";
      this.frame = frame;
      this.pending = [];
      this.ready = false;
      frame.addEventListener("load", () => this.start(new URL(url, location.href).href));
      document.documentElement.appendChild(frame);
      this.onmessage = null;
    }

    start(url) {
      const scope = this.frame.contentWindow;
      scope.postMessage = (data) => {
        const event = new MessageEvent("message", { data });
        if (typeof this.onmessage === "function") this.onmessage(event);
        this.dispatchEvent(event);
      };
      const script = scope.document.createElement("script");
      script.src = url;
      script.addEventListener("load", () => {
        this.ready = true;
        for (const data of this.pending.splice(0)) this.deliver(data);
      });
      script.addEventListener("error", () => this.dispatchEvent(new Event("error")));
      scope.document.body.appendChild(script);
    }

    deliver(data) {
      this.frame.contentWindow.dispatchEvent(new MessageEvent("message", { data }));
    }

    postMessage(data) {
      if (this.ready) this.deliver(data);
      else this.pending.push(data);
    }

    terminate() {
      this.frame.remove();
    }
  }

  window.Worker = IframeWorker;
})();
