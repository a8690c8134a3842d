"""herald_test.browser: Debian's chromium, headless, driven over the Chrome
DevTools Protocol with aiohttp's websocket client (python3-aiohttp), so the
console's browser test needs nothing from npm.

    b = await Browser.start(log_path)      # None when chromium is missing
    await b.goto("http://127.0.0.1:PORT/console/")
    await b.wait("document.querySelector('#view-login').hidden === false")
    await b.screenshot("/path/x.png")
    await b.close()

Every wait is bounded; a JavaScript exception in the page and every console
error are kept in b.errors for the test to assert on."""
import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import aiohttp


class BrowserError(Exception):
    pass


def chromium_path():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, proc, profile, session, ws):
        self.proc = proc
        self.profile = profile
        self.session = session
        self.ws = ws
        self.next_id = 0
        self.pending = {}
        self.errors = []
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, log_path, width=1280, height=900, timeout_s=30):
        """Starts chromium with a fresh profile and attaches to its page."""
        exe = chromium_path()
        if exe is None:
            return None
        profile = tempfile.mkdtemp(prefix="herald-chromium-")
        argv = [exe, "--headless=new", "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1", "--user-data-dir=" + profile,
                "--no-first-run", "--no-default-browser-check", "--disable-gpu",
                "--disable-extensions", "--disable-dev-shm-usage", "--disable-sync",
                "--window-size=%d,%d" % (width, height),
                # Its sandbox refuses root and needs user namespaces a CI
                # container may lack; the browser only loads the test's own
                # loopback pages.
                "--no-sandbox", "about:blank"]
        log = open(log_path, "ab")
        proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout_s
        port = None
        while port is None:
            if proc.poll() is not None:
                raise BrowserError("chromium exited with %s (log: %s)" % (proc.returncode,
                                                                       log_path))
            if time.monotonic() > deadline:
                proc.kill()
                raise BrowserError("chromium did not open its DevTools port in %d s" % timeout_s)
            try:
                with open(port_file) as f:
                    first = f.readline().strip()
                port = int(first) if first else None
            except (OSError, ValueError):
                pass
            await asyncio.sleep(0.1)
        pages = []
        while not pages:
            if time.monotonic() > deadline:
                proc.kill()
                raise BrowserError("chromium shows no page target")
            with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=5) as r:
                pages = [t for t in json.load(r) if t.get("type") == "page"]
            await asyncio.sleep(0.1)
        session = aiohttp.ClientSession()
        ws = await session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        b = cls(proc, profile, session, ws)
        await b.send("Page.enable")
        await b.send("Runtime.enable")
        await b.send("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": height, "deviceScaleFactor": 1,
                      "mobile": False})
        return b

    async def _read(self):
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                break
            m = json.loads(msg.data)
            if "id" in m:
                fut = self.pending.pop(m["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(m)
            elif m.get("method") == "Runtime.exceptionThrown":
                d = m["params"]["exceptionDetails"]
                self.errors.append("exception: %s" % (d.get("exception", {})
                                                      .get("description") or d.get("text")))
            elif m.get("method") == "Runtime.consoleAPICalled" and \
                    m["params"]["type"] in ("error", "assert"):
                self.errors.append("console.error: %s" % " ".join(
                    str(a.get("value", a.get("description"))) for a in m["params"]["args"]))
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(BrowserError("the DevTools connection closed"))

    async def send(self, method, params=None, timeout_s=30):
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method,
                                           "params": params or {}}))
        m = await asyncio.wait_for(fut, timeout_s)
        if "error" in m:
            raise BrowserError("%s: %s" % (method, m["error"]))
        return m["result"]

    async def eval(self, expr):
        """The value of the JavaScript expression EXPR (a promise is awaited)."""
        r = await self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                                 "awaitPromise": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise BrowserError("%s: %s" % (expr[:80], d.get("exception", {})
                                           .get("description") or d.get("text")))
        return r["result"].get("value")

    async def wait(self, expr, timeout_s=20, interval_s=0.2):
        """Evaluates EXPR until it is truthy; its value, or None after TIMEOUT_S."""
        deadline = time.monotonic() + timeout_s
        while True:
            v = await self.eval(expr)
            if v:
                return v
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(interval_s)

    async def goto(self, url):
        await self.send("Page.navigate", {"url": url})
        return await self.wait("document.readyState === 'complete'", 20)

    async def text(self, selector):
        return await self.eval("(e => e ? e.textContent : null)(document.querySelector(%s))"
                               % json.dumps(selector))

    async def fill(self, selector, value):
        """Sets an input's value as typing would (focus, value, input event)."""
        await self.eval("(e => { e.focus(); e.value = %s; "
                        "e.dispatchEvent(new Event('input', {bubbles: true})); })"
                        "(document.querySelector(%s))" % (json.dumps(value), json.dumps(selector)))

    async def click(self, selector):
        await self.eval("document.querySelector(%s).click()" % json.dumps(selector))

    async def key(self, key, code, keycode):
        """Presses and releases one key in the focused element (e.g. Enter)."""
        text = "\r" if key == "Enter" else ""
        for t in ("keyDown", "keyUp"):
            await self.send("Input.dispatchKeyEvent",
                            {"type": t, "key": key, "code": code, "text": text if t ==
                             "keyDown" else "", "windowsVirtualKeyCode": keycode})

    async def type_text(self, text):
        await self.send("Input.insertText", {"text": text})

    async def set_files(self, selector, paths):
        doc = await self.send("DOM.getDocument", {"depth": 0})
        node = await self.send("DOM.querySelector", {"nodeId": doc["root"]["nodeId"],
                                                     "selector": selector})
        await self.send("DOM.setFileInputFiles", {"nodeId": node["nodeId"], "files": paths})

    async def screenshot(self, path, full=False):
        """A PNG of the viewport, or with FULL of the whole page."""
        params = {"format": "png"}
        if full:
            m = await self.send("Page.getLayoutMetrics")
            size = m.get("cssContentSize") or m["contentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"],
                                "height": size["height"], "scale": 1})
        r = await self.send("Page.captureScreenshot", params)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))

    async def close(self):
        try:
            await asyncio.wait_for(self.ws.close(), 5)
        except (asyncio.TimeoutError, aiohttp.ClientError):
            pass
        await self.session.close()
        self.reader.cancel()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)
