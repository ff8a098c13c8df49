"""The page's side of the widget's comm, for tests that drive ``DtypeExplorer`` without a
browser (tests/frontends/test_widget.py, tests/reliability/test_widget_hostile.py): it records
every message the kernel sends and delivers updates as the widget manager does. The browser
tests (tests/frontends/browser) drive the real page."""

from __future__ import annotations

from typing import Any

from comm.base_comm import BaseComm


class PageComm(BaseComm):
    """A comm that keeps what the kernel sends and lets a test speak as the page."""

    def __init__(self, **kwargs: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        super().__init__(**kwargs)

    def publish_msg(
        self,
        msg_type: str,
        data: Any = None,
        metadata: Any = None,
        buffers: Any = None,
        **keys: Any,
    ) -> None:
        self.sent.append({"type": msg_type, "data": data})

    def updates(self, key: str) -> list[Any]:
        """Every value of ``key`` sent to the page, in order (the opening state first)."""
        found = []
        for message in self.sent:
            state = (message["data"] or {}).get("state", {})
            if key in state:
                found.append(state[key])
        return found

    def last_sent(self, key: str) -> Any:
        """The last value of ``key`` the kernel sent (echoes of the page's own writes left out)."""
        for message in reversed(self.sent):
            state = (message["data"] or {}).get("state", {})
            if key in state and (message["data"] or {}).get("method") != "echo_update":
                return state[key]
        raise KeyError(key)

    def page_sends(self, **state: Any) -> None:
        """Deliver an update from the page, as the widget manager does."""
        self.handle_msg(
            {
                "content": {"data": {"method": "update", "state": state, "buffer_paths": []}},
                "buffers": [],
            }
        )


def request(widget: Any, **changes: Any) -> dict[str, Any]:
    """The widget's request with ``changes``, as the page sends it; a new target starts from
    its catalog defaults (empty kwargs and shape), as the page's target picker does."""
    if "target" in changes:
        changes = {"kwargs": "", "shape": "", **changes}
    return {**widget.request, "nonce": widget.request.get("nonce", 0) + 1, **changes}
