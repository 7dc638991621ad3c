"""The framed JSON channel between the reward process and a sandboxed harness (:mod:`bots_verl.rewards.sandbox`)."""

from __future__ import annotations

import json
import os
import selectors
import time
from typing import Any

from bots_verl.rewards import _wire

__all__ = ["Channel", "ChannelClosed", "DeadlineExceeded"]


class ChannelClosed(Exception):
    """The sandbox ended, or sent something that is not a frame."""


class DeadlineExceeded(Exception):
    """The answer's time ran out."""


# ------------------------------------------------------------------------------------------------- channel
class Channel:
    """Length-prefixed JSON frames over a pair of pipes, every operation bounded by a deadline."""

    def __init__(self, write_fd: int | None, read_fd: int | None) -> None:
        self.write_fd, self.read_fd = write_fd, read_fd
        self._buffer = bytearray()
        # One selector per direction: a writable pipe is almost always ready, and waiting for it together with the
        # reading end would turn every wait for a reply into a busy loop.
        self._selectors: dict[int, selectors.BaseSelector] = {}
        for fd, event in ((write_fd, selectors.EVENT_WRITE), (read_fd, selectors.EVENT_READ)):
            if fd is not None:
                os.set_blocking(fd, False)
                self._selectors[fd] = selectors.DefaultSelector()
                self._selectors[fd].register(fd, event)

    def _wait(self, fd: int, deadline: float) -> None:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlineExceeded
            if self._selectors[fd].select(remaining):
                return

    def send(self, obj: Any, deadline: float) -> None:
        """Write one frame.

        Raises:
            DeadlineExceeded, ChannelClosed.
        """
        assert self.write_fd is not None
        payload = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8")
        view = memoryview(_wire.HEADER.pack(len(payload)) + payload)
        while view:
            self._wait(self.write_fd, deadline)
            try:
                view = view[os.write(self.write_fd, view) :]
            except BlockingIOError:
                continue
            except OSError as err:  # BrokenPipeError: the sandbox is gone
                raise ChannelClosed(str(err)) from err

    def _fill(self, size: int, deadline: float) -> None:
        assert self.read_fd is not None
        while len(self._buffer) < size:
            self._wait(self.read_fd, deadline)
            try:
                chunk = os.read(self.read_fd, max(size - len(self._buffer), 1 << 16))
            except BlockingIOError:
                continue
            except OSError as err:
                raise ChannelClosed(str(err)) from err
            if not chunk:
                raise ChannelClosed("end of stream")
            self._buffer += chunk

    def recv(self, deadline: float, max_bytes: int) -> Any:
        """Read one frame of at most ``max_bytes`` bytes.

        Raises:
            DeadlineExceeded, ChannelClosed (also for an oversized frame or one that is not JSON).
        """
        head = _wire.HEADER.size
        self._fill(head, deadline)
        (size,) = _wire.HEADER.unpack(bytes(self._buffer[:head]))
        if size > max_bytes:
            raise ChannelClosed(f"frame of {size} bytes exceeds {max_bytes}")
        self._fill(head + size, deadline)
        payload = self._buffer[head : head + size]  # one copy (json reads a bytearray as well as bytes)
        del self._buffer[: head + size]
        try:
            return json.loads(payload)
        except (ValueError, RecursionError) as err:  # not JSON, or nested too deeply for the decoder
            raise ChannelClosed("malformed frame") from err

    def recv_raw(self, size: int, deadline: float) -> bytearray:
        """Read exactly ``size`` raw bytes (the payload a frame has announced) into one buffer of that size.

        The caller bounds ``size``; nothing beyond it is read from the pipe, so the buffer is all this costs.

        Raises:
            DeadlineExceeded, ChannelClosed.
        """
        assert self.read_fd is not None
        data = bytearray(size)
        with memoryview(data) as view:
            # Bytes read ahead together with the frame come first.
            filled = min(size, len(self._buffer))
            view[:filled] = self._buffer[:filled]
            del self._buffer[:filled]
            while filled < size:
                self._wait(self.read_fd, deadline)
                try:
                    count = os.readv(self.read_fd, [view[filled:]])
                except BlockingIOError:
                    continue
                except OSError as err:
                    raise ChannelClosed(str(err)) from err
                if not count:
                    raise ChannelClosed("end of stream")
                filled += count
        return data

    def close_writer(self) -> None:
        """Close the writing end (the other side reads end of file)."""
        if self.write_fd is not None:
            self._selectors.pop(self.write_fd).close()
            try:
                os.close(self.write_fd)
            except OSError:
                pass
            self.write_fd = None

    def close(self) -> None:
        self.close_writer()
        for selector in self._selectors.values():
            selector.close()
        self._selectors.clear()
        if self.read_fd is not None:
            try:
                os.close(self.read_fd)
            except OSError:
                pass
            self.read_fd = None
