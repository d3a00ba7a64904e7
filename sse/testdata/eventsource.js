// Runs the browser snippet of docs/concepts.md ("Streaming to a browser")
// under Node.js against a real stream, with a minimal EventSource over
// fetch, and prints what the page showed as JSON.
//
//	node eventsource.js <snippet.js> <url>
//
// The EventSource follows the HTML spec's parsing (lines end at CRLF, CR
// or LF; "event" sets the type, "data" lines are joined with LF, comments
// are ignored, a blank line dispatches an event with data, of type
// "message" without an event line). When the stream ends and the page has
// not closed the source, it fires "error" without data, as a browser
// does, and counts the reconnection a browser would then make.
"use strict";
const fs = require("node:fs");

class EventSource {
  constructor(url) {
    this.url = url;
    this.readyState = 0; // CONNECTING
    this.listeners = {};
    this.closedOn = null; // the event being handled when the page closed it
    this.reconnects = 0;
    this.dispatching = null;
    this.abort = new AbortController();
    this.finished = this.run();
  }
  addEventListener(type, fn) {
    (this.listeners[type] ||= []).push(fn);
  }
  close() {
    if (this.readyState === 2) return;
    this.readyState = 2; // CLOSED
    this.closedOn = this.dispatching;
    this.abort.abort();
  }
  dispatch(type, event) {
    if (this.readyState === 2) return;
    this.dispatching = type;
    for (const fn of this.listeners[type] || []) fn(event);
    this.dispatching = null;
  }
  async run() {
    try {
      const res = await fetch(this.url, { headers: { Accept: "text/event-stream" }, signal: this.abort.signal });
      if (res.status !== 200 || !(res.headers.get("content-type") || "").startsWith("text/event-stream")) {
        throw new Error(`status ${res.status}, content-type ${res.headers.get("content-type")}`);
      }
      this.readyState = 1; // OPEN
      this.dispatch("open", { type: "open" });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      let type = "";
      let data = [];
      const line = (l) => {
        if (l === "") {
          if (data.length > 0) this.dispatch(type || "message", { type: type || "message", data: data.join("\n") });
          type = "";
          data = [];
          return;
        }
        if (l.startsWith(":")) return;
        const i = l.indexOf(":");
        const field = i < 0 ? l : l.slice(0, i);
        let value = i < 0 ? "" : l.slice(i + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") type = value;
        else if (field === "data") data.push(value);
      };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        while (this.readyState !== 2) {
          const m = /\r\n|\r|\n/.exec(buf);
          // A CR at the end may be the first half of a CRLF.
          if (m === null || (m[0] === "\r" && m.index === buf.length - 1)) break;
          line(buf.slice(0, m.index));
          buf = buf.slice(m.index + m[0].length);
        }
        if (this.readyState === 2) {
          // Closed by a listener: a pending read of an aborted body may
          // never settle, so stop reading.
          reader.cancel().catch(() => {});
          return;
        }
      }
    } catch (err) {
      if (this.readyState === 2) return; // closed by the page
      this.failure = String(err);
    }
    if (this.readyState === 2) return;
    // The stream ended with the source open: a browser fires "error"
    // (without data) and reconnects unless the page closes it.
    this.readyState = 0;
    this.dispatch("error", { type: "error" });
    if (this.readyState !== 2) this.reconnects++;
  }
}

async function main() {
  const [snippet, url] = process.argv.slice(2);
  const code = fs.readFileSync(snippet, "utf8");
  const streamAnswer = new Function("EventSource", `${code}\nreturn streamAnswer;`)(EventSource);
  const shown = []; // every answer text the page showed, in order
  const statuses = [];
  const element = (log) => {
    let text = "";
    return {
      get textContent() { return text; },
      set textContent(v) { text = v; log.push(v); },
    };
  };
  const answer = element(shown);
  const status = element(statuses);
  const source = streamAnswer(url, answer, status);
  await source.finished;
  console.log(JSON.stringify({
    answer: answer.textContent,
    shown,
    status: status.textContent,
    statuses,
    closedOn: source.closedOn,
    readyState: source.readyState,
    reconnects: source.reconnects,
    failure: source.failure || "",
  }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
