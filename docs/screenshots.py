"""Screenshots of the leaderboard's HTML page, for docs/leaderboard.md, at 1500 px and at 400 px.

    python docs/screenshots.py            # writes docs/images/leaderboard-1500.png, leaderboard-400.png

The page shows the published rows and a few demonstration runs (``demo_results``): a BM25 run of
the published configuration (beside its row, with the differences), a new system, an MTEB result.
Headless Chromium (Debian's ``/usr/bin/chromium``) is driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``): no network port, no browser download, no Python dependency.
tests/test_leaderboard_page.py drives the page with the same ``Chromium`` class.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path


class Chromium:
    """One headless Chromium with one page, spoken to over the DevTools protocol on fds 3 and 4."""

    def __init__(self, executable: str | None = None) -> None:
        executable = executable or shutil.which("chromium")
        if executable is None:
            raise FileNotFoundError("chromium is not installed (apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="r2med-chromium-")
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()
        # The browser reads commands on fd 3 and writes replies on fd 4. posix_spawn places them there
        # (safe with threads, unlike a preexec_fn); they are first copied above 10, so that neither
        # dup2 can overwrite the other's source.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser, from_browser)]
        argv = [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={self.profile}", "about:blank"]
        self.pid = os.posix_spawn(executable, argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, high[0], 3), (os.POSIX_SPAWN_DUP2, high[1], 4),
            *((os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2))])
        for fd in (to_browser, from_browser, *high):
            os.close(fd)
        self._next, self._buffer, self.events = 0, b"", []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=True)

    def send(self, method: str, params: dict | None = None, *, session: bool = False) -> dict:
        """Send one command and wait for its reply (events that arrive meanwhile are kept)."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _receive(self) -> dict:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def open(self, url: str, width: int, height: int = 900) -> None:
        """Load ``url`` in a ``width`` × ``height`` viewport (a phone's, below 600 px) and wait for it.
        An address that differs from the page's only after ``#`` loads afresh too (reloaded), as a
        shared address opens in a new tab."""
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": width < 600}, session=True)
        self.events.clear()
        if "loaderId" not in self.send("Page.navigate", {"url": url}, session=True):  # moved within the page
            while not any(e.get("method") == "Page.navigatedWithinDocument" and e["params"].get("url") == url
                          for e in self.events):
                self.events.append(self._receive())
            self.events.clear()
            self.send("Page.reload", {"ignoreCache": False}, session=True)
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._receive())

    def js(self, expression: str):
        """The value of a JavaScript expression in the page (exceptions raise)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click at the middle of the element (scrolled into view first)."""
        box = self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView("
                      "{block: 'center', inline: 'center'}); const r = e.getBoundingClientRect(); "
                      "return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1}, session=True)

    def press(self, key: str, code: int, text: str = "") -> None:
        """A key pressed and released on whatever has the focus (``"Enter", 13, "\\r"``)."""
        for kind in ("keyDown", "keyUp"):
            params = {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code}
            if kind == "keyDown" and text:
                params["text"] = text
            self.send("Input.dispatchKeyEvent", params, session=True)

    def screenshot(self, path: Path, top: float = 0, height: float | None = None) -> None:
        """The page from ``top`` down, ``height`` pixels (default: to its end, beyond the viewport), as a PNG."""
        size = self.js("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        height = min(height or size[1], size[1] - top)
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                    "clip": {"x": 0, "y": top, "width": size[0], "height": height,
                                                             "scale": 1}}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, OSError):
            pass
        for _ in range(100):  # ten seconds to quit, then killed
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                break
            time.sleep(0.1)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)


def write_result(folder: Path, task: str, ndcg: float, name: str, extra: dict | None = None,
                 meta: dict | None = None) -> None:
    """An mteb TaskResult on R2MED's official data (mteb's pinned revision) and its model_meta.json
    (``meta``: more of mteb's ModelMeta fields, such as ``n_parameters``)."""
    from r2med_tasks.tasks.specs import R2MED_TASKS

    folder.mkdir(parents=True, exist_ok=True)
    revision = next(t.revision for t in R2MED_TASKS if t.name == task)
    scores = {"main_score": ndcg, "ndcg_at_10": ndcg, **(extra or {}), "hf_subset": "default",
              "languages": ["eng-Latn"]}
    (folder / f"{task}.json").write_text(json.dumps({
        "dataset_revision": revision, "task_name": task, "mteb_version": "2.0", "evaluation_time": 1.0,
        "scores": {"test": [scores]}}))
    (folder / "model_meta.json").write_text(json.dumps({"name": name, "revision": folder.name, **(meta or {})}))


def write_published_config_run(folder: Path, command: str, name: str, scores: dict[str, float]) -> None:
    """Results as r2med-run writes them for ``command`` on R2MED's official data: its pipeline
    record (configuration and command) and each task's identity, so that the run joins the published row."""
    import shlex

    from r2med_tasks.board.sources import command_config
    from r2med_tasks.results.identity import FORMAT

    for task, value in scores.items():
        write_result(folder, task, value, f"r2med/{name.lower()}")
        (folder / "r2med").mkdir(exist_ok=True)
        (folder / "r2med" / f"{task}.identity.json").write_text(json.dumps({"data": {"official": True}}))
    (folder / "r2med" / "pipeline.json").write_text(json.dumps(
        {"format": FORMAT, "name": name, "label": name, "config": command_config(command), "experiment_kwargs": None,
         "command": shlex.split(command)}))


# What mteb's ModelMeta records of intfloat/e5-base-v2 (mteb.get_model_meta), as its results carry it.
E5_META = {"n_parameters": 109000000, "open_weights": True, "license": "mit"}


def demo_results(root: Path) -> tuple[Path, Path]:
    """A results folder (a reproduction of the published BM25, a new system with every metric,
    mteb's nAUCs among them) and an MTEB results folder (one model, with its size and licence), as
    a reader's would be; returns both."""
    from r2med_tasks.board.leaderboard import published_row
    from r2med_tasks.tasks.specs import R2MED_TASKS

    results, mteb = root / "results", root / "mteb-results"
    bm25 = published_row("BM25")
    write_published_config_run(results / "r2med__bm25" / "0a1b2c3d", "r2med-run --plugin bm25", "BM25",
                               {t: round(v / 100 + (0.0012 if i % 2 else -0.0007), 5)
                                for i, (t, v) in enumerate(bm25.scores.items())})
    for i, task in enumerate(R2MED_TASKS):
        write_result(results / "acme__med-embed" / "v2", task.name, 0.30 + 0.03 * i, "acme/med-embed",
                     {"ndcg_at_1": 0.2 + 0.02 * i, "recall_at_100": 0.6 + 0.02 * i, "map_at_10": 0.15 + 0.01 * i,
                      "nauc_ndcg_at_10_max": round(0.1234 + 0.01 * i, 4)})
        write_result(mteb / "intfloat__e5-base-v2" / "1c644c92", task.name, 0.12 + 0.02 * i, "intfloat/e5-base-v2",
                     meta=E5_META)
    return results, mteb


def main() -> int:
    from click.testing import CliRunner

    from r2med_tasks.cli import cli

    out = Path(__file__).parent / "images"
    out.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        results, mteb = demo_results(Path(tmp))
        page = Path(tmp) / "board.html"
        result = CliRunner().invoke(cli, ["leaderboard", str(results), "--mteb-results", str(mteb), "--format", "html",
                                          "--output", str(page)])
        if result.exit_code:
            print(result.output, file=sys.stderr)
            return 1
        browser = Chromium()
        try:
            for width, height in ((1500, 1150), (400, 1500)):
                browser.open(page.as_uri(), width)
                browser.screenshot(out / f"leaderboard-{width}.png", height=height)
                charts = browser.js("document.getElementById('charts-title').getBoundingClientRect().top + scrollY - 10")
                browser.screenshot(out / f"leaderboard-charts-{width}.png", top=charts, height=height)
                print(out / f"leaderboard-{width}.png", out / f"leaderboard-charts-{width}.png")
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
