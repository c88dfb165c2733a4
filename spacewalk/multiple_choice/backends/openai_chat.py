"""An OpenAI-compatible chat-completions client (`POST {base_url}/chat/completions`): the paper's GPT-4o and
GPT-5, and vLLM, SGLang, `transformers serve`, Ollama or any server that speaks the same API (docs/serving.md).

The base URL and the key come from environment variables (names configurable: OPENAI_BASE_URL and
OPENAI_API_KEY by default; a local server may need no key). Each item is one request: the prompt's parts in
order as content parts, the item's frames (FrameRule: the model's count uniformly, or an fps rule) where the
prompt's visual marker is, each context visual's frames (a slice by the same rule, a still as one image) where
the prompt puts it, temperature 0. How a clip goes (`clip_as`): `images`, one base64 JPEG `image_url` part per
frame (what every server takes, OpenAI's API included); or `video`, one `video_url` part per clip holding a
data URL of the same frames (`video_format`: `mp4`, an H.264 file of the frames at their sampling rate, which
vLLM and SGLang decode; `jpeg`, vLLM's own `data:video/jpeg;base64,<frame>,<frame>,...`, the frames
themselves). A still is an image either way. `max_tokens` None: the task's answer limit
(spacewalk/multiple_choice/generation.py), which may be None too: the field is then not sent and the server's
own limit applies (EgoCross: the authors let their API models answer without one).

`concurrency` requests are in flight at once (threads; the runner takes the replies as they arrive,
`answer_as_completed`, and writes each item's record then; the finished run's files are in the task's item
order, so they equal a serial run's). Requests are spaced to at most `requests_per_minute` over all of them.
Each attempt has `timeout_seconds` in all, from connecting to the reply's last byte (a server that trickles its
reply, or never answers, is cut off then: a socket timeout alone bounds each read, not the reply), and a reply
of more than `max_reply_bytes` is refused as it arrives. A 429, a 5xx, a timeout, a refused or dropped
connection is retried after an exponential backoff (`backoff_seconds * 2**attempt`, or the server's Retry-After
when it says), up to `max_retries` times; then, or at once for any other HTTP error, a TLS error, a reply that
is not JSON, too large, or holds no answer (no `choices`), a `ServerError` names the URL, the status, the item
and what came back (a command ends on it with one `error:` line, exit code 2). The run stops after recording the replies
already in (re-running resumes), and the other requests in flight stop retrying.
Each reply's meta says what the model was shown (`visuals`: per visual, in prompt order, its kind, frame
count and frame size as sent). Standard library only (urllib, threads).

Visual budget (spacewalk/multiple_choice/budget.py; all null by default: frames sent as before): `max_pixels` /
`min_pixels` bound each frame's area as sent (after `image_max_side`; aspect kept, sides rounded down when shrinking
and up when enlarging), `max_total_pixels` an item's frames x pixels over all its visuals; an item over it gets every
frame's bound lowered to one common cap (not below min_pixels; skipped when that is null), then clip frames dropped
one at a time from the longest clip (the later on a tie; kept ones spread uniformly), stills never. The server may
resize again (OpenAI's `detail`, a vLLM model's processor): the record says what was sent. run.json's "visual": the
frame rule, image_max_side and the budget.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import logging
import math
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from fractions import Fraction
from typing import Any

import numpy as np

from spacewalk.core.errors import ConfigError, UserInputError
from spacewalk.media.h264 import h264_writer
from spacewalk.multiple_choice.budget import VisualBudget, area_within, fit, kept, shown
from spacewalk.multiple_choice.frames import FrameRule, sample_frames
from spacewalk.multiple_choice.generation import TokenLimited
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.task import Prompt, Reply

log = logging.getLogger(__name__)

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
CLIP_AS = ("images", "video")
VIDEO_FORMATS = ("mp4", "jpeg")


class Aborted(RuntimeError):
    """Another request of the same call failed for good: this one stops retrying."""


class ServerError(UserInputError, RuntimeError):
    """The server at the configured URL gave no usable reply, for good (after the retries, or at once where a retry
    cannot help): the message names the URL, the item, the status and what came back. The user's to fix (the URL,
    the key, the server), so a command ends on it with its message alone; a RuntimeError, as it was raised before."""


class _Retry(Exception):
    """An attempt that may succeed when repeated: a 429 or 5xx, a timeout, a refused or dropped connection."""

    def __init__(self, problem: str, retry_after: str | None = None):
        super().__init__(problem)
        self.problem, self.retry_after = problem, retry_after


class _Recorded:
    """A urllib handler that keeps the sockets its connections open, so that the attempt's deadline can shut them
    (urllib lets go of the connection's socket once the headers are in; the reply's reader keeps using it)."""

    def __init__(self, sockets: list, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sockets = sockets

    def do_open(self, http_class, req, **kwargs):
        def connection(*args, **kw):
            made = http_class(*args, **kw)
            connect = made.connect

            def connect_and_record() -> None:
                connect()
                self.sockets.append(made.sock)

            made.connect = connect_and_record
            return made

        return super().do_open(connection, req, **kwargs)


class _RecordedHTTP(_Recorded, urllib.request.HTTPHandler):
    pass


class _RecordedHTTPS(_Recorded, urllib.request.HTTPSHandler):
    pass


def _positive(name: str, value: Any, allow_none: bool = False, minimum: float = 0.0, strict: bool = True,
              whole: bool = False) -> None:
    """Refuse a setting that is not a number above (or, not strict, at least) `minimum`: a negative timeout,
    retry count or rate would otherwise fail deep inside, or be read as no limit."""
    if value is None and allow_none:
        return
    kind = int if whole else (int, float)
    ok = (not isinstance(value, bool) and isinstance(value, kind) and math.isfinite(value)
          and (value > minimum if strict else value >= minimum))
    if not ok:
        what = "a whole number" if whole else "a number"
        bound = f"above {minimum:g}" if strict else f"of at least {minimum:g}"
        raise ConfigError(f"{name}={value!r}: {what} {bound}{' (or null: none)' if allow_none else ''}")


def _resized(frame: np.ndarray, max_side: int | None):
    from PIL import Image

    image = Image.fromarray(frame)
    if max_side is not None and max(image.size) > max_side:
        image.thumbnail((max_side, max_side))
    return image


def _jpeg(image, quality: int = 90) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def jpeg_data_url(frame: np.ndarray, max_side: int | None = 768, quality: int = 90) -> str:
    return "data:image/jpeg;base64," + _jpeg(_resized(frame, max_side), quality)


def video_data_url(frames: np.ndarray, times: np.ndarray, max_side: int | None = 768, video_format: str = "mp4",
                   quality: int = 90) -> str:
    """One clip's frames as a `video_url` data URL: vLLM's frame list (`jpeg`) or an H.264 mp4 (`mp4`) whose rate
    is the frames' sampling rate (from their times; 1 frame/s when they have none), so that a model reading
    time from the container's fps (Qwen2.5-VL's absolute time) gets the clip's."""
    images = [_resized(f, max_side) for f in frames]
    if video_format == "jpeg":
        return "data:video/jpeg;base64," + ",".join(_jpeg(image, quality) for image in images)
    span = float(times[-1] - times[0]) if len(times) > 1 and np.isfinite(times).all() else 0.0
    rate = Fraction((len(times) - 1) / span).limit_denominator(1000) if span > 0 else Fraction(1)
    width, height = (max(2, side - side % 2) for side in images[0].size)  # yuv420p needs even sides
    buffer = io.BytesIO()
    # crf 18, near-lossless: the server should see what the JPEG path shows
    with h264_writer(buffer, rate, width, height, options={"crf": "18"}, container_format="mp4") as write:
        write(np.asarray(image.convert("RGB").resize((width, height))) for image in images)
    return "data:video/mp4;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def chat_messages(parts: Sequence[str | Sequence[str] | dict], system: str | None = None,
                  image_detail: str | None = None) -> list[dict]:
    """Chat messages from resolved parts in order: a text, a visual's image URLs (a list, possibly empty), or a
    content part as it is (a clip's `video_url`)."""
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, str):
            content.append({"type": "text", "text": part})
            continue
        if isinstance(part, dict):
            content.append(part)
            continue
        for url in part:
            image = {"url": url} | ({"detail": image_detail} if image_detail else {})
            content.append({"type": "image_url", "image_url": image})
    messages = [{"role": "system", "content": system}] if system else []
    return messages + [{"role": "user", "content": content}]


class OpenAIChatBackend(TokenLimited):
    LIMIT_FIELD, LIMITS_SIDE = "max_tokens", "api"  # None: no max_tokens sent

    def __init__(self, model: str, base_url_env: str = "OPENAI_BASE_URL", api_key_env: str = "OPENAI_API_KEY",
                 default_base_url: str = "https://api.openai.com/v1", num_frames: int | None = 8,
                 fps: float | None = None, max_frames: int | None = None, text_only: bool = False,
                 image_max_side: int | None = 768, image_detail: str | None = None, max_tokens: int | None = None,
                 temperature: float = 0.0, requests_per_minute: float | None = 60.0, max_retries: int = 6,
                 backoff_seconds: float = 2.0, max_backoff_seconds: float = 120.0, timeout_seconds: float = 120.0,
                 extra_body: dict | None = None, video_backend: str = "decord", concurrency: int = 8,
                 clip_as: str = "images", video_format: str = "mp4", max_pixels: int | None = None,
                 min_pixels: int | None = None, max_total_pixels: int | None = None,
                 max_reply_bytes: int = 1 << 20):
        _positive("timeout_seconds", timeout_seconds)
        _positive("max_retries", max_retries, strict=False, whole=True)
        _positive("requests_per_minute", requests_per_minute, allow_none=True)
        _positive("backoff_seconds", backoff_seconds, strict=False)
        _positive("max_backoff_seconds", max_backoff_seconds, strict=False)
        _positive("max_reply_bytes", max_reply_bytes, whole=True)
        _positive("image_max_side", image_max_side, allow_none=True, whole=True)
        _positive("temperature", temperature, strict=False)
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = os.environ.get(base_url_env, default_base_url).rstrip("/")
        self.api_key = os.environ.get(api_key_env)
        self.api_key_env = api_key_env
        self.rule = None if text_only else FrameRule(num_frames, fps, max_frames, video_backend)
        self.image_max_side, self.image_detail = image_max_side, image_detail
        self.budget = VisualBudget(max_pixels, min_pixels, max_total_pixels)
        self._set_limit(max_tokens)
        self.temperature = float(temperature)
        self.min_interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self.max_retries = int(max_retries)
        self.backoff, self.max_backoff = float(backoff_seconds), float(max_backoff_seconds)
        self.timeout = float(timeout_seconds)
        self.max_reply_bytes = int(max_reply_bytes)
        self.extra_body = dict(extra_body or {})
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency={concurrency!r}: the number of requests in flight, a whole number of "
                              "at least 1")
        if clip_as not in CLIP_AS:
            raise ConfigError(f"clip_as={clip_as!r}: one of {CLIP_AS}")
        if video_format not in VIDEO_FORMATS:
            raise ConfigError(f"video_format={video_format!r}: one of {VIDEO_FORMATS}")
        self.concurrency, self.clip_as, self.video_format = concurrency, clip_as, video_format
        # one schedule for every thread (and every copy `limited` makes: the lock is shared, so the copies'
        # requests are spaced together only while they run one after the other, as the runner runs them)
        self._rate_lock = threading.Lock()
        self._last_request = -float("inf")

    # ---- HTTP ----

    def _wait_for_rate_limit(self) -> float:
        """Block until this request's turn: each request takes the next free slot `min_interval` after the one
        before, whichever thread asks. Returns the slot (a time.monotonic() value)."""
        with self._rate_lock:
            slot = max(time.monotonic(), self._last_request + self.min_interval)
            self._last_request = slot
        wait_for = slot - time.monotonic()
        if wait_for > 0:
            time.sleep(wait_for)
        return slot

    def _attempt(self, request: urllib.request.Request) -> bytes:
        """One attempt's reply body (status 200), within `timeout` in all and `max_reply_bytes`. Raises _Retry
        where another attempt may succeed, ServerError where it cannot."""
        sockets: list = []
        opener = urllib.request.build_opener(_RecordedHTTP(sockets), _RecordedHTTPS(sockets))
        expired = threading.Event()

        def expire() -> None:  # wakes a read that is blocked on the socket: the attempt then ends at once
            expired.set()
            for sock in sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        timer = threading.Timer(self.timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            try:
                with opener.open(request, timeout=self.timeout) as response:
                    reply = self._read(response, "the reply")
                if expired.is_set():  # the connection was closed under the read: the body may be cut short
                    raise _Retry(f"no complete reply within timeout_seconds={self.timeout:g}")
                return reply
            except urllib.error.HTTPError as e:
                message = self._read(e, "the error reply").decode(errors="replace")[:500]
                if expired.is_set():
                    raise  # handled below: the time ran out while the error's text came
                if e.code in RETRY_STATUS:
                    raise _Retry(f"HTTP {e.code}: {message}",
                                 e.headers.get("Retry-After") if e.headers else None) from None
                hint = f" (is {self.api_key_env} set?)" if e.code in (401, 403) else ""
                raise ServerError(f"HTTP {e.code}{hint}: {message}") from None
        except (ServerError, _Retry):
            raise
        except (OSError, http.client.HTTPException) as e:  # refused, reset, cut short (URLError is an OSError)
            reason = e.reason if isinstance(e, urllib.error.URLError) else e
            # the socket's own timeout is the attempt's whole time, so a read that timed out is past the deadline
            # too (on a loaded machine it can fire before the deadline's timer thread runs)
            if expired.is_set() or isinstance(reason, TimeoutError):
                raise _Retry(f"no complete reply within timeout_seconds={self.timeout:g}") from None
            if isinstance(reason, ssl.SSLError):  # a certificate or protocol mismatch: the same on every attempt
                raise ServerError(f"{type(reason).__name__}: {reason}") from None
            raise _Retry(f"{type(reason).__name__}: {reason}") from None
        finally:
            timer.cancel()

    def _read(self, response, what: str) -> bytes:
        """The body, refused as soon as it passes `max_reply_bytes` (or says it will): a runaway server would
        otherwise fill the memory, and records.jsonl, with whatever it sends."""
        limit = self.max_reply_bytes
        declared = response.headers.get("Content-Length") if response.headers else None
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            raise ServerError(f"{what} is {int(declared)} bytes, over max_reply_bytes={limit}")
        chunks, size = [], 0
        while True:
            chunk = response.read(min(65536, limit + 1 - size))
            if not chunk:
                # a read of a given size ends quietly where the connection does: a reply cut short is no reply
                if declared is not None and declared.strip().isdigit() and size < int(declared):
                    raise http.client.IncompleteRead(b"".join(chunks), int(declared) - size)
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise ServerError(f"{what} is over max_reply_bytes={limit} (refused after {size} bytes)")

    def _post(self, body: dict, what: str, abort: threading.Event | None = None) -> dict:
        """The server's JSON reply to `body`, retried as the module says; `what` names the request in errors (the
        item)."""
        url = f"{self.base_url}/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode()
        attempt = 0
        while True:
            if abort is not None and abort.is_set():
                raise Aborted(f"{url}: another request failed; this one stops")
            self._wait_for_rate_limit()
            try:
                reply = self._attempt(urllib.request.Request(url, data=data, headers=headers, method="POST"))
            except ServerError as e:
                raise ServerError(f"{url}: {what}: {e}") from None
            except _Retry as e:
                if attempt == self.max_retries:
                    raise ServerError(f"{url}: {what}: gave up after {attempt + 1} attempts; last: {e.problem}"
                                      ) from None
                delay = min(self.max_backoff, self.backoff * 2 ** attempt)
                if e.retry_after is not None:
                    try:
                        delay = min(self.max_backoff, max(delay, float(e.retry_after)))
                    except ValueError:
                        pass
                log.warning("%s: %s (attempt %d of %d); retrying in %.1f s", what, e.problem, attempt + 1,
                            self.max_retries + 1, delay)
                attempt += 1
                if abort is not None:
                    abort.wait(delay)  # wakes early when another request fails for good
                else:
                    time.sleep(delay)
                continue
            try:
                return json.loads(reply.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise ServerError(f"{url}: {what}: the reply is not JSON ({e}): {reply[:200]!r}") from None

    def _complete(self, messages: list[dict], what: str, abort: threading.Event | None = None) -> tuple[str, dict]:
        body = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if self.max_tokens is not None:  # None: no limit sent, the server's own applies
            body["max_tokens"] = self.max_tokens
        body |= self.extra_body
        response = self._post(body, what, abort)
        try:
            text = response["choices"][0]["message"]["content"] or ""
            if not isinstance(text, str):
                raise TypeError(text)
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"{self.base_url}/chat/completions: {what}: no answer in the reply (choices[0]."
                              f"message.content): {json.dumps(response)[:300]}") from None
        return text, {"usage": response.get("usage")} if response.get("usage") else {}

    # ---- requests in flight ----

    def _as_completed(self, jobs: Iterable[tuple[Hashable, Callable[[threading.Event], Any]]]
                      ) -> Iterator[tuple[Hashable, Any]]:
        """(key, result) of each job as it finishes, at most `concurrency` running at once; jobs are taken from
        the iterable only as threads free up (so frames are decoded and encoded for those in flight alone). A
        job that fails stops the rest (they stop retrying) after the results already in are given out."""
        jobs = iter(jobs)
        abort = threading.Event()
        pending: dict[Future, Hashable] = {}
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="openai-chat") as pool:

            def submit() -> None:
                for key, job in jobs:
                    pending[pool.submit(job, abort)] = key
                    return

            try:
                for _ in range(self.concurrency):
                    submit()
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    failed = None
                    for future in sorted(done, key=lambda f: f.exception() is not None):
                        key = pending.pop(future)
                        if future.exception() is not None:
                            failed = failed or future.exception()
                            continue
                        yield key, future.result()
                    if failed is not None:
                        raise failed
                    for _ in done:
                        submit()
            finally:
                abort.set()
                for future in pending:
                    future.cancel()

    def _in_order(self, calls: Sequence[Callable[[threading.Event], Any]]) -> list[Any]:
        results = dict(self._as_completed(enumerate(calls)))
        return [results[i] for i in range(len(calls))]

    # ---- the Backend protocol ----

    def visual_settings(self) -> dict[str, Any] | None:
        """run.json's "visual": the frame rule, the frames' longest side and the budget the items were sent with."""
        if self.rule is None:
            return None
        rule = self.rule
        return {"frames": {"num_frames": rule.num_frames, "fps": rule.fps, "max_frames": rule.max_frames},
                "image_max_side": self.image_max_side, **self.budget.as_json(),
                "rule": "spacewalk/multiple_choice/budget.py"}

    def _visual(self, visual: Visual, frames: np.ndarray, times: np.ndarray, max_side: int | None
                ) -> tuple[list[str] | dict, dict[str, Any]]:
        """A visual's frames as content (their image URLs, or one video part) and what was sent of it."""
        kind = "image" if visual.is_still else "clip"
        if kind == "clip" and self.clip_as == "video":
            url = video_data_url(frames, times, max_side, self.video_format)
            content: list[str] | dict = {"type": "video_url", "video_url": {"url": url}}
        else:
            content = [jpeg_data_url(f, max_side) for f in frames]
        size = list(_resized(frames[0], max_side).size)  # (width, height) as sent
        return content, {"kind": kind if kind == "image" else f"clip as {self.clip_as}", "frames": len(frames),
                         "size": size}

    def _sampled(self, visuals: Sequence[Visual], item: MultipleChoiceItem | None
                 ) -> tuple[list[tuple[np.ndarray, np.ndarray]], int | None]:
        """Each visual's frames and times, within the budget, and the longest side to send them at (None when the
        budget has sized them)."""
        sampled = [sample_frames(v, self.rule) for v in visuals]
        if not self.budget.active or not sampled:
            return sampled, self.image_max_side
        # the budget's rule starts from the frames as they would be sent (image_max_side applied)
        shapes = [("image" if v.is_still else "clip", len(f), *_resized(f[0], self.image_max_side).size[::-1])
                  for v, (f, _) in zip(visuals, sampled)]
        plan = fit(shapes, self.budget, area_within, None if item is None else item.id)
        out = []
        for (frames, times), p in zip(sampled, plan):
            out.append((shown(frames, p), times[kept(len(times), p.frames)]))
        return out, None

    def _messages(self, prompt: Prompt, item: MultipleChoiceItem | None) -> tuple[list[dict], list[dict]]:
        """Texts in order; every visual (the item's clip, context slices and stills) as images or a video part,
        or left out when the backend is text only; with what was sent of each visual."""
        parts_in = list(prompt.visual_parts(item, with_visuals=self.rule is not None))
        visuals = [part for part in parts_in if isinstance(part, Visual)]
        sampled, max_side = self._sampled(visuals, item)
        frames_of = iter(sampled)
        parts: list[str | list[str] | dict] = []
        sent = []
        for part in parts_in:
            if isinstance(part, Visual):
                content, seen = self._visual(part, *next(frames_of), max_side)
                parts.append(content)
                sent.append(seen)
            else:
                parts.append(part)
        return chat_messages(parts, prompt.system, self.image_detail), sent

    def _reply(self, item: MultipleChoiceItem | None, prompt: Prompt, abort: threading.Event | None = None) -> Reply:
        messages, sent = self._messages(prompt, item)
        text, meta = self._complete(messages, "a prompt without an item" if item is None else f"item {item.id}",
                                    abort)
        return Reply(text=text, meta=meta | ({"visuals": sent} if sent else {}))

    def answer_as_completed(self, pairs: Iterable[tuple[MultipleChoiceItem, Prompt]]
                            ) -> Iterator[tuple[MultipleChoiceItem, Prompt, Reply]]:
        """(item, prompt, reply) as each reply arrives, `concurrency` requests in flight: the runner's way in
        (it records each item then)."""
        jobs = (((item, prompt), lambda abort, item=item, prompt=prompt: self._reply(item, prompt, abort))
                for item, prompt in pairs)
        for (item, prompt), reply in self._as_completed(jobs):
            yield item, prompt, reply

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        return self._in_order([lambda abort, i=i, p=p: self._reply(i, p, abort) for i, p in zip(items, prompts)])

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        """Free text; the prompts' context visuals are shown (no item: no clip)."""
        return [reply.text for reply in
                self._in_order([lambda abort, p=p: self._reply(None, p, abort) for p in prompts])]

    def caption_images(self, images: Sequence[np.ndarray], prompt: str) -> list[str]:
        """One request per image: the image, then `prompt` (the captioner of the caption-enhanced LLM)."""
        return self._in_order([
            lambda abort, k=k, image=image: self._complete(
                chat_messages([[jpeg_data_url(image, self.image_max_side)], prompt], image_detail=self.image_detail),
                f"caption of image {k}", abort)[0]
            for k, image in enumerate(images)])
