"""An OpenAI-compatible chat-completions client (`POST {base_url}/chat/completions`): the paper's GPT-4o and
GPT-5, and vLLM, Ollama or any server that speaks the same API.

The base URL and the key come from environment variables (names configurable: OPENAI_BASE_URL and
OPENAI_API_KEY by default; a local server may need no key). Each item is one request: the prompt's parts in
order as content parts, the item's frames (FrameRule: the model's count uniformly, or an fps rule) as base64
JPEG `image_url` parts where the prompt's visual marker is, each context visual's frames (a slice by the
same rule, a still as one image) where the prompt puts it, temperature 0. `max_tokens` None: the task's
answer limit (spacewalk/multiple_choice/generation.py), which may be None too: the field is then not sent and
the server's own limit applies (EgoCross: the authors let their API models answer without one).
Requests are spaced to at most `requests_per_minute`; a 429, a 5xx, a timeout or a dropped connection is
retried after an exponential backoff (`backoff_seconds * 2**attempt`, or the server's Retry-After when it
says), up to `max_retries` times, then the error is raised (the run stops; re-running resumes). Any other
HTTP error is raised at once with the server's message. Standard library only (urllib).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import numpy as np

from spacewalk.multiple_choice.frames import FrameRule, sample_frames
from spacewalk.multiple_choice.generation import TokenLimited
from spacewalk.multiple_choice.items import MultipleChoiceItem, Visual
from spacewalk.multiple_choice.task import Prompt, Reply

log = logging.getLogger(__name__)

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


def jpeg_data_url(frame: np.ndarray, max_side: int | None = 768, quality: int = 90) -> str:
    from PIL import Image

    image = Image.fromarray(frame)
    if max_side is not None and max(image.size) > max_side:
        image.thumbnail((max_side, max_side))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def chat_messages(parts: Sequence[str | Sequence[str]], system: str | None = None,
                  image_detail: str | None = None) -> list[dict]:
    """Chat messages from resolved parts in order: a text, or a visual's image URLs (a list, possibly empty)."""
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, str):
            content.append({"type": "text", "text": part})
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
                 temperature: float = 0.0, requests_per_minute: float = 60.0, max_retries: int = 6,
                 backoff_seconds: float = 2.0, max_backoff_seconds: float = 120.0, timeout_seconds: float = 120.0,
                 extra_body: dict | None = None, video_backend: str = "decord"):
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = os.environ.get(base_url_env, default_base_url).rstrip("/")
        self.api_key = os.environ.get(api_key_env)
        self.api_key_env = api_key_env
        self.rule = None if text_only else FrameRule(num_frames, fps, max_frames, video_backend)
        self.image_max_side, self.image_detail = image_max_side, image_detail
        self._set_limit(max_tokens)
        self.temperature = float(temperature)
        self.min_interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self.max_retries = int(max_retries)
        self.backoff, self.max_backoff = float(backoff_seconds), float(max_backoff_seconds)
        self.timeout = float(timeout_seconds)
        self.extra_body = dict(extra_body or {})
        self._last_request = -float("inf")

    # ---- HTTP ----

    def _wait_for_rate_limit(self) -> None:
        wait = self._last_request + self.min_interval - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self._last_request = time.monotonic()

    def _post(self, body: dict) -> dict:
        url = f"{self.base_url}/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode()
        for attempt in range(self.max_retries + 1):
            self._wait_for_rate_limit()
            retry_after = None
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read().decode())
            except urllib.error.HTTPError as e:
                message = e.read().decode(errors="replace")[:500]
                if e.code not in RETRY_STATUS:
                    hint = f" (is {self.api_key_env} set?)" if e.code in (401, 403) else ""
                    raise RuntimeError(f"{url}: HTTP {e.code}{hint}: {message}") from e
                problem = f"HTTP {e.code}: {message}"
                retry_after = e.headers.get("Retry-After") if e.headers else None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                problem = f"{type(e).__name__}: {e}"
            if attempt == self.max_retries:
                raise RuntimeError(f"{url}: gave up after {self.max_retries + 1} attempts; last: {problem}")
            delay = min(self.max_backoff, self.backoff * 2 ** attempt)
            if retry_after is not None:
                try:
                    delay = min(self.max_backoff, max(delay, float(retry_after)))
                except ValueError:
                    pass
            log.warning("%s (attempt %d of %d); retrying in %.1f s", problem, attempt + 1, self.max_retries + 1, delay)
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _complete(self, messages: list[dict]) -> tuple[str, dict]:
        body = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if self.max_tokens is not None:  # None: no limit sent, the server's own applies
            body["max_tokens"] = self.max_tokens
        body |= self.extra_body
        response = self._post(body)
        try:
            text = response["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as e:
            raise RuntimeError(f"{self.base_url}: unexpected response {str(response)[:300]}") from e
        return text, {"usage": response.get("usage")} if response.get("usage") else {}

    # ---- the Backend protocol ----

    def _messages(self, prompt: Prompt, item: MultipleChoiceItem | None) -> list[dict]:
        """Texts in order; every visual (the item's clip, context slices and stills) as its frames' JPEG URLs,
        or left out when the backend is text only."""
        parts: list[str | list[str]] = []
        for part in prompt.visual_parts(item, with_visuals=self.rule is not None):
            if isinstance(part, Visual):
                parts.append([jpeg_data_url(f, self.image_max_side) for f in sample_frames(part, self.rule)[0]])
            else:
                parts.append(part)
        return chat_messages(parts, prompt.system, self.image_detail)

    def answer(self, items: Sequence[MultipleChoiceItem], prompts: Sequence[Prompt]) -> list[Reply]:
        replies = []
        for item, prompt in zip(items, prompts):
            text, meta = self._complete(self._messages(prompt, item))
            replies.append(Reply(text=text, meta=meta))
        return replies

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        """Free text; the prompts' context visuals are shown (no item: no clip)."""
        return [self._complete(self._messages(p, None))[0] for p in prompts]

    def caption_images(self, images: Sequence[np.ndarray], prompt: str) -> list[str]:
        """One request per image: the image, then `prompt` (the captioner of the caption-enhanced LLM)."""
        return [self._complete(chat_messages([[jpeg_data_url(image, self.image_max_side)], prompt],
                                             image_detail=self.image_detail))[0]
                for image in images]
