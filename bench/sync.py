"""Sync benchmark: `eventlake sync` (Spark) against DuckDB on the same raw archive.

Generates a deterministic raw archive in the Segment archive layout of a fresh eventlake project,
1,000,000 messages by default (``--messages N``) in 10 gzip files, received over 3 days with ~1%
duplicate message ids, from one of two inputs (``--input``):

- ``analytics`` (the default; issue 37's demanding input): messages as analytics.js sends them,
  ~1.18 KB of JSON and ~39 flattened values each: 70% track over 30 event names with 5-15
  properties from Segment's spec vocabulary (nested objects, a few arrays), 15% page, 10% identify,
  3% screen, 1% group, 1% alias, a full context on every message (campaign name, source, medium,
  term and content, user agent, locale, timezone, ip, library, the page's path, referrer, search,
  title and url; app, device, os, network and screen on the mobile screens; traits on identify);
- ``basic`` (the input of the figures before 2026-11-28): all six types, 30 track event names with
  5-15 properties including nested objects, a small server-side context, ~0.79 KB and ~29 values.

Then times, each as a whole process (start-up included):

- eventlake: `eventlake sync` (read, validate, flatten, dedupe, type, partitioned Parquet, catalog),
  by phase: start-up, the parse job, counts/dedupe/plan, the write job, commit and exit (edges from
  the run's own lines and Spark's event log), with the CPU seconds of the process tree in each
  (driver, JVM, Python workers);
- baseline: DuckDB reading the same gzip files, deduplicating by messageId and writing Parquet
  partitioned by type/day/hour, just before and just after eventlake's first run (their mean is
  the baseline: this machine's speed moves by a quarter within the hour);
- Spark's floor: the same job as DuckDB's, in Spark alone (no Python per message): one Spark
  session built from the project's settings as `eventlake sync` builds it, `spark.read.json` with
  its default inference, the first copy of each messageId by receivedAt (a window), Parquet
  partitioned by type/day/hour. What any design running the job through Spark on this machine
  costs at least, before flattening, typing and the catalog.

eventlake runs once per ``--parsers`` (``[sync] parser``; default: the columnar parse, then the
per-message one as the baseline in the same run), each on its own copy of the generated project.

Prints messages/s, MB/s of raw input, peak memory (RSS of the whole process tree) and the ratios
per-message / columnar, DuckDB wall time / eventlake wall time (>= 1.0: eventlake is at least as
fast) and DuckDB / Spark's floor.

    .venv/bin/python bench/sync.py                 # 1,000,000 messages of the analytics input, 3 days
    .venv/bin/python bench/sync.py --hours 1       # the same messages received within one hour
    .venv/bin/python bench/sync.py --messages 200000 --input basic --parsers columnar
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent
EVENTLAKE = str(Path(sys.executable).parent / "eventlake")
EVENTS = [
    "Product Viewed", "Product Added", "Product Removed", "Cart Viewed", "Checkout Started",
    "Checkout Step Viewed", "Checkout Step Completed", "Payment Info Entered", "Order Completed",
    "Order Updated", "Order Refunded", "Order Cancelled", "Coupon Entered", "Coupon Applied",
    "Coupon Denied", "Promotion Viewed", "Promotion Clicked", "Products Searched", "Product List Viewed",
    "Product List Filtered", "Signed Up", "Signed In", "Signed Out", "Video Playback Started",
    "Video Playback Paused", "Video Content Completed", "Email Opened", "Email Link Clicked",
    "Push Notification Received", "Application Opened",
]  # fmt: skip
TYPES = ["track"] * 70 + ["page"] * 12 + ["identify"] * 8 + ["screen"] * 6 + ["group"] * 2 + ["alias"] * 2
START = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _props(rng: random.Random, event: str) -> dict:
    count = 5 + (zlib.crc32(event.encode()) % 11)  # not hash(): salted per process
    props = {}
    for i in range(count):
        kind = i % 5
        key = f"{event.split()[0].lower()}_{['id', 'value', 'label', 'flag', 'meta'][kind]}_{i}"
        if kind == 0:
            props[key] = f"id-{rng.randrange(100000)}"
        elif kind == 1:
            props[key] = round(rng.random() * 500, 2) if i % 2 else rng.randrange(1000)
        elif kind == 2:
            props[key] = rng.choice(["red", "green", "blue", "large", "small"])
        elif kind == 3:
            props[key] = rng.random() < 0.5
        else:
            props[key] = {"source": rng.choice(["web", "ios"]), "position": rng.randrange(20),
                          "tags": ["a", "b"][: rng.randrange(3)]}  # fmt: skip
    return props


def _message(rng: random.Random, n: int, received: datetime, source_id: str) -> dict:
    kind = TYPES[n % len(TYPES)]
    user = f"user-{rng.randrange(50000)}"
    ts = received - timedelta(seconds=rng.randrange(5))
    message = {
        "type": kind, "messageId": str(uuid.UUID(int=rng.getrandbits(128))), "userId": user,
        "anonymousId": f"anon-{rng.randrange(80000)}", "timestamp": ts.isoformat(timespec="milliseconds"),
        "originalTimestamp": ts.isoformat(timespec="milliseconds"),
        "sentAt": ts.isoformat(timespec="milliseconds"),
        "receivedAt": received.isoformat(timespec="milliseconds"),
        "projectId": source_id, "version": 2, "channel": "server",
        "context": {"library": {"name": "analytics-python", "version": "2.4.0"}, "ip": "203.0.113.9",
                    "locale": "en-US", "userAgent": "Mozilla/5.0", "page": {"path": "/p", "url": "https://x/p"}},
        "integrations": {},
    }  # fmt: skip
    if kind == "track":
        event = EVENTS[rng.randrange(len(EVENTS))]
        message["event"] = event
        message["properties"] = _props(rng, event)
    elif kind in ("page", "screen"):
        message["name"] = rng.choice(["Home", "Shop", "Cart", "Blog"])
        message["properties"] = {"path": "/shop", "title": "Shop", "referrer": "https://search.example"}
    elif kind == "identify":
        message["traits"] = {
            "email": f"{user}@example.com",
            "plan": rng.choice(["free", "pro"]),
            "age": rng.randrange(18, 80),
            "address": {"city": "Berlin", "country": "DE"},
        }
    elif kind == "group":
        message["groupId"] = f"team-{rng.randrange(500)}"
        message["traits"] = {"name": "Team", "employees": rng.randrange(2, 900)}
    else:
        message["previousId"] = message["anonymousId"]
    return message


# -- the demanding input (issue 37): analytics.js-style messages with a full context ----------------

ANALYTICS_TYPES = ["track"] * 70 + ["page"] * 15 + ["identify"] * 10 + ["screen"] * 3 + ["group"] + ["alias"]
PAGES = [
    ("/", "Home", ""), ("/shop", "Shop", "?sort=popular"), ("/shop/shoes", "Shoes", "?size=42&color=black"),
    ("/cart", "Cart", ""), ("/checkout", "Checkout", "?step=2"), ("/blog/how-we-ship", "How we ship", ""),
    ("/pricing", "Pricing", "?plan=pro"), ("/account/orders", "Your orders", ""),
    ("/search", "Search results", "?q=running+shoes"), ("/help/returns", "Returns", ""),
]  # fmt: skip
REFERRERS = ["https://www.google.com/", "https://news.ycombinator.com/", "https://t.co/xyz", "",
             "https://www.facebook.com/", "https://duckduckgo.com/"]  # fmt: skip
USER_AGENTS = [
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.1 Safari/605.1.15",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/119.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/119.0.6045.163 Mobile Safari/537.36",
]
CAMPAIGNS = [
    {"name": "black_friday_2026", "source": "google", "medium": "cpc", "term": "running shoes",
     "content": "ad_v2"},
    {"name": "newsletter_w47", "source": "newsletter", "medium": "email", "term": "", "content": "hero"},
    {"name": "spring_launch", "source": "facebook", "medium": "social", "term": "sneakers",
     "content": "carousel"},
    {"name": "retargeting_q4", "source": "bing", "medium": "cpc", "term": "trail shoes", "content": "text"},
]  # fmt: skip
LOCALES = ["en-US", "en-GB", "de-DE", "fr-FR", "es-ES", "ja-JP", "pt-BR"]
TIMEZONES = ["America/New_York", "Europe/Berlin", "Europe/London", "Asia/Tokyo", "America/Los_Angeles"]
SCREENS = [(1920, 1080, 1), (1440, 900, 2), (390, 844, 3), (412, 915, 2.625), (2560, 1440, 1)]
DEVICES = [
    {"manufacturer": "Apple", "model": "iPhone15,2", "name": "iPhone", "type": "ios"},
    {"manufacturer": "Google", "model": "Pixel 8", "name": "shiba", "type": "android"},
    {"manufacturer": "Samsung", "model": "SM-S911B", "name": "dm1q", "type": "android"},
]  # fmt: skip
# Segment's e-commerce and video spec properties: (name, kind), kind one of id, text, money, int,
# flag, url, object, array
PROPERTY_VOCABULARY = [
    ("product_id", "id"), ("sku", "id"), ("category", "text"), ("name", "text"), ("brand", "text"),
    ("variant", "text"), ("price", "money"), ("quantity", "int"), ("coupon", "text"), ("position", "int"),
    ("url", "url"), ("image_url", "url"), ("currency", "text"), ("revenue", "money"), ("value", "money"),
    ("order_id", "id"), ("affiliation", "text"), ("subtotal", "money"), ("tax", "money"),
    ("shipping", "money"), ("discount", "money"), ("checkout_id", "id"), ("step", "int"),
    ("payment_method", "text"), ("shipping_method", "text"), ("list_id", "id"), ("query", "text"),
    ("promotion_id", "id"), ("creative", "text"), ("in_stock", "flag"), ("is_gift", "flag"),
    ("session_id", "id"), ("content_asset_id", "id"), ("total_length", "int"), ("bitrate", "int"),
    ("framerate", "money"), ("video_player", "text"), ("sound", "int"), ("full_screen", "flag"),
    ("ad_enabled", "flag"), ("email_id", "id"), ("email_subject", "text"), ("link_url", "url"),
    ("method", "text"), ("plan", "text"), ("product", "object"), ("location", "object"),
    ("experiment", "object"), ("products", "array"), ("tags", "array"), ("filters", "array"),
]  # fmt: skip
WORDS = ["red", "running", "trail", "sneaker", "classic", "pro", "lite", "summer", "winter", "black",
         "organic", "cotton", "leather", "slim", "wide", "kids", "men", "women", "sale", "new"]  # fmt: skip


def _event_keys(event: str) -> list[tuple[str, str]]:
    """The 5-15 properties an event always has: a fixed draw from the vocabulary (crc32, not hash()),
    with at least one nested object or array for one event in three."""
    seed = zlib.crc32(event.encode())
    picker = random.Random(seed)
    keys = picker.sample(PROPERTY_VOCABULARY, 5 + seed % 11)
    if seed % 3 == 0 and not any(kind in ("object", "array") for _, kind in keys):
        keys[-1] = PROPERTY_VOCABULARY[-6 + seed % 6]
    return keys


EVENT_KEYS = {event: _event_keys(event) for event in EVENTS}


def _value(rng: random.Random, kind: str) -> object:
    if kind == "id":
        return f"{rng.getrandbits(40):010x}"
    if kind == "text":
        return " ".join(rng.choice(WORDS) for _ in range(1 + rng.randrange(2)))
    if kind == "money":
        return round(rng.random() * 300, 2)
    if kind == "int":
        return rng.randrange(1, 50)
    if kind == "flag":
        return rng.random() < 0.5
    if kind == "url":
        return f"https://shop.example.com/p/{rng.choice(WORDS)}-{rng.randrange(10000)}"
    if kind == "object":
        return {"id": f"{rng.getrandbits(32):08x}", "name": rng.choice(WORDS), "variant": rng.choice(WORDS),
                "price": round(rng.random() * 100, 2), "meta": {"rank": rng.randrange(100)}}  # fmt: skip
    # array: a few tags, or a products list of objects (an array: one JSON text column)
    if rng.random() < 0.5:
        return [rng.choice(WORDS) for _ in range(rng.randrange(1, 5))]
    return [{"product_id": f"{rng.getrandbits(32):08x}", "price": round(rng.random() * 100, 2),
             "quantity": rng.randrange(1, 4)} for _ in range(rng.randrange(1, 3))]  # fmt: skip


def _zulu(moment: datetime) -> str:
    """As analytics.js and Segment's API write times: milliseconds and ``Z``."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _analytics_message(rng: random.Random, n: int, received: datetime, source_id: str) -> dict:
    """One message as analytics.js (or a mobile library, for screens) sends it: the full context."""
    kind = ANALYTICS_TYPES[n % len(ANALYTICS_TYPES)]
    user = f"user-{rng.randrange(200000)}"
    anonymous = str(uuid.UUID(int=rng.getrandbits(128)))
    ts = received - timedelta(milliseconds=rng.randrange(5000))
    sent = ts + timedelta(milliseconds=rng.randrange(200))
    path, title, search = PAGES[rng.randrange(len(PAGES))]
    width, height, density = SCREENS[rng.randrange(len(SCREENS))]
    context: dict = {
        "campaign": CAMPAIGNS[rng.randrange(len(CAMPAIGNS))],
        "ip": f"{rng.randrange(1, 224)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
        "locale": LOCALES[rng.randrange(len(LOCALES))],
        "timezone": TIMEZONES[rng.randrange(len(TIMEZONES))],
    }
    if kind == "screen":  # a mobile library: app, device, os, network, screen; no page
        context["screen"] = {"width": width, "height": height, "density": density}
        device = DEVICES[rng.randrange(len(DEVICES))]
        context["library"] = {"name": f"analytics-{device['type']}", "version": "4.5.1"}
        context["app"] = {
            "name": "Shop",
            "version": "3.2.0",
            "build": "3200",
            "namespace": "com.example.shop",
        }
        context["device"] = {**device, "id": str(uuid.UUID(int=rng.getrandbits(128)))}
        context["os"] = {"name": "iOS" if device["type"] == "ios" else "Android", "version": "17.1"}
        context["network"] = {
            "wifi": rng.random() < 0.6,
            "cellular": rng.random() < 0.5,
            "carrier": "T-Mobile",
        }
    else:
        context["library"] = {"name": "analytics.js", "version": "next-1.61.0"}
        context["userAgent"] = USER_AGENTS[rng.randrange(len(USER_AGENTS))]
        context["page"] = {
            "path": path, "referrer": REFERRERS[rng.randrange(len(REFERRERS))], "search": search,
            "title": title, "url": f"https://shop.example.com{path}{search}",
        }  # fmt: skip
    message = {
        "anonymousId": anonymous, "context": context, "integrations": {},
        "messageId": f"ajs-next-{rng.getrandbits(128):032x}",
        "originalTimestamp": _zulu(ts), "projectId": source_id, "receivedAt": _zulu(received),
        "sentAt": _zulu(sent), "timestamp": _zulu(ts),
        "type": kind, "userId": user if rng.random() < 0.7 else None, "version": 2, "channel": "client",
    }  # fmt: skip
    if kind == "track":
        event = EVENTS[rng.randrange(len(EVENTS))]
        message["event"] = event
        message["properties"] = {key: _value(rng, k) for key, k in EVENT_KEYS[event]}
    elif kind == "page":
        message["name"] = title
        message["properties"] = {**context["page"], "name": title}
    elif kind == "screen":
        message["name"] = rng.choice(["Home", "Product", "Cart", "Checkout", "Settings"])
        message["properties"] = {"name": message["name"], "product_id": _value(rng, "id")}
    elif kind == "identify":
        traits = {
            "email": f"{user}@example.com", "name": f"{rng.choice(WORDS).title()} {rng.choice(WORDS)}",
            "plan": rng.choice(["free", "pro", "enterprise"]), "age": rng.randrange(18, 80),
            "createdAt": (received - timedelta(days=rng.randrange(900))).isoformat(timespec="seconds"),
            "address": {"city": rng.choice(["Berlin", "Paris", "Austin", "Osaka"]), "country": "DE",
                        "postalCode": f"{rng.randrange(10000, 99999)}",
                        "street": f"{rng.randrange(1, 200)} Main St"},
            "logins": rng.randrange(500),
        }  # fmt: skip
        message["traits"] = traits
        context["traits"] = {"email": traits["email"], "plan": traits["plan"]}
    elif kind == "group":
        message["groupId"] = f"team-{rng.randrange(500)}"
        message["traits"] = {"name": f"Team {rng.choice(WORDS)}", "employees": rng.randrange(2, 900),
                             "industry": rng.choice(["retail", "media", "software"]),
                             "plan": "enterprise"}  # fmt: skip
    else:
        message["previousId"] = anonymous
    if message["userId"] is None:
        if kind in ("identify", "alias"):  # an alias needs its userId; identify() is mostly a login
            message["userId"] = user
        else:
            del message["userId"]
    return message


INPUTS = {"basic": _message, "analytics": _analytics_message}


def generate(
    project: Path, source_id: str, messages: int, files: int = 10, seed: int = 7, kind: str = "basic",
    hours: float = 72.0,
) -> tuple[int, int]:  # fmt: skip
    """Write the archive of input ``kind`` (``INPUTS``), received over ``hours`` (3 days by
    default); returns (messages written including duplicates, bytes of raw JSON)."""
    build = INPUTS[kind]
    rng = random.Random(seed)
    per_file = messages // files
    raw_bytes = 0
    written = 0
    recent: list[bytes] = []
    for f in range(files):
        received0 = START + timedelta(hours=hours * f / files)
        day_ms = (
            int(datetime(received0.year, received0.month, received0.day, tzinfo=timezone.utc).timestamp())
            * 1000
        )
        path = project / "lake" / "segment-logs" / source_id / str(day_ms) / f"bench-{f:03d}.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wb", compresslevel=1) as out:
            for i in range(per_file):
                received = received0 + timedelta(seconds=i * (hours * 3600 / files) / per_file)
                if recent and rng.random() < 0.01:
                    line = recent[rng.randrange(len(recent))]  # a client retry: the same message again
                else:
                    line = orjson.dumps(build(rng, written, received, source_id))
                    if len(recent) < 5000:
                        recent.append(line)
                    else:
                        recent[rng.randrange(5000)] = line
                out.write(line + b"\n")
                raw_bytes += len(line) + 1
                written += 1
    return written, raw_bytes


class PeakRss:
    """Peak resident memory of a process and all its descendants, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
                except OSError:
                    pass
        tree, frontier = [self.pid], [self.pid]
        while frontier:
            frontier = [pid for pid, parent in parents.items() if parent in frontier]
            tree += frontier
        return tree

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for pid in self._tree():
                try:
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1]) * 1024
                except OSError:
                    continue  # ended since the listing
                self._sampled(pid)
            self.peak = max(self.peak, total)
            self._after_sample()
            self._stop.wait(0.2)

    def _sampled(self, pid: int) -> None:
        """What a subclass notes of each live process of the tree at each sample."""

    def _after_sample(self) -> None:
        """What a subclass notes once a sample of the whole tree is taken."""

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def timed(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, int]:
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=env)
    rss = PeakRss(process.pid)
    code = process.wait()
    peak = rss.stop()
    if code:
        raise SystemExit(f"{command[0]} exited with {code}")
    return time.monotonic() - started, peak


TICKS = os.sysconf("SC_CLK_TCK")
PROGRESS = re.compile(r"^\[\s*([0-9.]+)s\] (.*)$")


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def _process_kind(root: int, pid: int) -> str:
    """``driver`` (the root process: eventlake's Python), ``jvm`` (Spark's JVM) or ``workers``
    (Spark's Python workers and anything else the run starts)."""
    if pid == root:
        return "driver"
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "workers"
    return "jvm" if name == "java" else "workers"


class TreeSampler(PeakRss):
    """Peak RSS of a process and its descendants, and their CPU seconds (the last value seen of
    each process; a process that ends between two samples loses at most 0.2 s), with a timeline
    of the CPU seconds used so far by kind of process (:func:`_process_kind`)."""

    def __init__(self, pid: int) -> None:
        self.cpu: dict[int, float] = {}
        self.kinds: dict[int, str] = {}
        self.loads: list[float] = []
        self.started = time.monotonic()
        self.timeline: list[tuple[float, dict[str, float]]] = []  # (seconds since start, CPU s by kind)
        super().__init__(pid)  # starts sampling

    def _sampled(self, pid: int) -> None:
        used = cpu_seconds(pid)
        if used:
            self.cpu[pid] = max(self.cpu.get(pid, 0.0), used)
            # each time: Spark's JVM starts as spark-submit's shell and becomes java (exec)
            self.kinds[pid] = _process_kind(self.pid, pid)

    def _after_sample(self) -> None:
        self.loads.append(os.getloadavg()[0])
        by_kind = {"driver": 0.0, "jvm": 0.0, "workers": 0.0}
        for pid, used in self.cpu.items():
            by_kind[self.kinds[pid]] += used
        self.timeline.append((time.monotonic() - self.started, by_kind))

    def stop(self) -> tuple[int, float, float]:  # type: ignore[override]
        """Peak RSS, CPU seconds, the mean of the machine's 1-minute load average."""
        self._stop.set()
        self._thread.join()
        return self.peak, sum(self.cpu.values()), sum(self.loads) / max(1, len(self.loads))

    def cpu_at(self, at: float) -> dict[str, float]:
        """CPU seconds by kind used by ``at`` (seconds since start): the last sample before it."""
        seen = {"driver": 0.0, "jvm": 0.0, "workers": 0.0}
        for when, by_kind in self.timeline:
            if when > at:
                break
            seen = by_kind
        return seen


# -- eventlake sync by phase -----------------------------------------------------------------------

PHASES = ("start-up", "parse job", "counts, dedupe, plan", "write", "commit + exit")


@dataclass
class SyncRun:
    """One ``eventlake sync``: wall, peak RSS, CPU, its progress lines and Spark's jobs."""

    wall: float = 0.0
    peak_rss: int = 0
    cpu: float = 0.0
    load: float = 0.0
    progress: list[tuple[float, str]] = field(default_factory=list)  # (seconds since start, line)
    jobs: list[tuple[float, float]] = field(default_factory=list)  # Spark jobs (start, end), same clock
    sampler: TreeSampler | None = None

    def phases(self) -> list[tuple[str, float, float]]:
        """``(phase, start, end)`` in seconds since the process started: start-up (JVM, session,
        catalog, lease, listing) to the run's "syncing" line; the parse job (the longest Spark job
        before the run's counts line; Python workers: gunzip, parse, validate, flatten, value types,
        the pieces); counts, dedupe and plan (from the parse job's end to the write job's start);
        the write job (the longest job after the counts line) to the first table's line; commit
        and exit (publish, catalog, report, the JVM's exit)."""
        syncing = next((at for at, line in self.progress if "archive files" in line), None)
        counts = next((at for at, line in self.progress if "duplicates dropped" in line), None)
        tables = [at for at, line in self.progress if re.search(r": \d+ rows", line)]
        first_table = next((at for at in tables if counts is not None and at >= counts), None)
        if syncing is None or counts is None or first_table is None:
            return [("total", 0.0, self.wall)]
        before = [job for job in self.jobs if syncing <= job[0] and job[1] <= counts + 1]
        after = [job for job in self.jobs if counts <= job[0] + 1 and job[1] <= first_table + 1]
        parse_end = max(before, key=lambda job: job[1] - job[0])[1] if before else counts
        write_start = max(after, key=lambda job: job[1] - job[0])[0] if after else counts
        edges = [0.0, syncing, parse_end, max(parse_end, write_start), first_table, self.wall]
        return [(name, edges[i], edges[i + 1]) for i, name in enumerate(PHASES)]

    def report(self, messages: int) -> None:
        print(f"  {'phase':<22} {'wall s':>7} {'CPU s':>7} {'driver':>7} {'JVM':>7} {'workers':>8} "
              f"{'CPU s per 1M msgs':>18}")  # fmt: skip
        assert self.sampler is not None
        for name, start, end in self.phases():
            first, last = self.sampler.cpu_at(start), self.sampler.cpu_at(end)
            used = {kind: last[kind] - first[kind] for kind in last}
            total = sum(used.values())
            print(f"  {name:<22} {end - start:7.1f} {total:7.1f} {used['driver']:7.1f} {used['jvm']:7.1f} "
                  f"{used['workers']:8.1f} {total * 1e6 / messages:18.0f}")  # fmt: skip
        print(f"  {'whole process':<22} {self.wall:7.1f} {self.cpu:7.1f} {'':>7} {'':>7} {'':>8} "
              f"{self.cpu * 1e6 / messages:18.0f}   "
              f"(load average {self.load:.1f} on {os.cpu_count()} cores)")  # fmt: skip


def spark_jobs(event_log: Path, started_epoch: float) -> list[tuple[float, float]]:
    """``(start, end)`` of every Spark job in an event log directory (Spark 4 writes a folder of
    rolled files per application), in seconds since ``started_epoch``."""
    starts: dict[int, float] = {}
    jobs = []
    for path in sorted(p for p in event_log.rglob("*") if p.is_file()):  # Spark 4: eventlog_v2_*/events_*
        for line in path.read_text(errors="replace").splitlines():
            if '"SparkListenerJob' not in line[:40]:
                continue
            event = orjson.loads(line)
            if event["Event"] == "SparkListenerJobStart":
                starts[event["Job ID"]] = event["Submission Time"] / 1000 - started_epoch
            elif event["Event"] == "SparkListenerJobEnd" and event["Job ID"] in starts:
                jobs.append((starts[event["Job ID"]], event["Completion Time"] / 1000 - started_epoch))
    return sorted(jobs)


def sync_by_phase(project: Path, env: dict[str, str], event_log: Path) -> SyncRun:
    """``eventlake sync`` in ``project`` (whose ``[spark.conf]`` writes Spark's event log to
    ``event_log``), its progress lines echoed, the process tree sampled."""
    shutil.rmtree(event_log, ignore_errors=True)
    event_log.mkdir(parents=True)
    run = SyncRun()
    started_epoch, started = time.time(), time.monotonic()
    process = subprocess.Popen(
        [EVENTLAKE, "sync", "--format", "json"], cwd=project, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    run.sampler = TreeSampler(process.pid)
    noise: list[str] = []
    assert process.stderr is not None
    for line in process.stderr:
        match = PROGRESS.match(line.rstrip("\n"))
        if match:
            at = time.monotonic() - started
            print(f"  [{at:6.1f}s] {match.group(2)}", flush=True)
            run.progress.append((at, match.group(2)))
        else:
            noise.append(line.rstrip("\n"))
    code = process.wait()
    run.wall = time.monotonic() - started
    run.peak_rss, run.cpu, run.load = run.sampler.stop()
    if code:
        tail = "\n".join(noise[-30:])
        raise SystemExit(f"eventlake sync exited with {code}\n{tail}")
    run.jobs = spark_jobs(event_log, started_epoch)
    return run


def flat_values(project: Path, sample: int = 20000) -> tuple[float, int]:
    """Flattened values per message (eventlake's ``flatten``, the first ``sample`` lines of each
    archive file) and the columns of the widest segment type."""
    from eventlake.schema.flatten import flatten

    values = lines = 0
    columns: dict[str, set[str]] = {}
    for path in sorted((project / "lake" / "segment-logs").rglob("*.gz")):
        with gzip.open(path, "rb") as archive:
            for n, line in enumerate(archive):
                if n >= sample:
                    break
                message = orjson.loads(line)
                flat = flatten(message).values
                values += len(flat)
                lines += 1
                kind = message.get("event") or message["type"]
                columns.setdefault(kind, set()).update(flat)
    return values / max(1, lines), max((len(c) for c in columns.values()), default=0)


DUCKDB_SCRIPT = textwrap.dedent(
    """
    import sys, duckdb
    archive, out = sys.argv[1], sys.argv[2]
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("SET preserve_insertion_order = false")
    con.execute(f'''
        COPY (
            SELECT *, strftime(CAST(receivedAt AS TIMESTAMP), '%Y-%m-%d') AS day,
                   strftime(CAST(receivedAt AS TIMESTAMP), '%H') AS hr
            FROM read_ndjson_auto('{archive}/**/*.gz')
            QUALIFY row_number() OVER (PARTITION BY messageId ORDER BY receivedAt) = 1
        ) TO '{out}' (FORMAT parquet, PARTITION_BY (type, day, hr))
    ''')
    """
)


SPARK_SCRIPT = textwrap.dedent(
    """
    import sys
    from eventlake.config import load_settings
    from eventlake.jvm.session import spark_session
    from pyspark.sql import Window, functions as F
    config, archive, out = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = spark_session(load_settings(config), say=lambda text: None)
    frame = spark.read.json(f"{archive}/*/*/*.gz")
    received = F.col("receivedAt").cast("timestamp")
    first = Window.partitionBy("messageId").orderBy("receivedAt")
    (
        frame.withColumn("day", F.date_format(received, "yyyy-MM-dd"))
        .withColumn("hr", F.date_format(received, "HH"))
        .withColumn("_n", F.row_number().over(first)).filter("_n = 1").drop("_n")
        .write.mode("overwrite").partitionBy("type", "day", "hr").parquet(out)
    )
    spark.stop()
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--input", choices=sorted(INPUTS), default="analytics",
                        help="the generator: analytics (default, issue 37's) or basic")  # fmt: skip
    parser.add_argument("--seed", type=int, default=7, help="the generator's seed (default 7)")
    parser.add_argument(
        "--hours",
        type=float,
        default=72.0,
        help="the messages are received over this many hours (default 72)",
    )
    parser.add_argument(
        "--parsers", default="columnar,per-message",
        help="eventlake sync once per [sync] parser, each on its own copy of the project (default: "
        "columnar,per-message: the per-message parse is the baseline, in the same run)",
    )  # fmt: skip
    parser.add_argument("--workdir", type=Path, default=None, help="keep the generated data here")
    parser.add_argument(
        "--skip-duckdb", action="store_true", help="time eventlake alone (no DuckDB baseline, no Spark floor)"
    )
    parser.add_argument(
        "--skip-spark-floor", action="store_true", help="do not time Spark doing DuckDB's job"
    )
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-bench-"))
    project = work / "project"
    shutil.rmtree(project, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE")}
    subprocess.run([EVENTLAKE, "init", str(project)], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([EVENTLAKE, "sources", "add", "bench", "--write-key", "wk_bench"], cwd=project, check=True,
                   env=env, stdout=subprocess.DEVNULL)  # fmt: skip
    source_id = next(
        line.split('"')[1]
        for line in (project / "eventlake.toml").read_text().splitlines()
        if line.startswith("id =")
    )
    event_log = work / "spark-events"
    config = project / "eventlake.toml"
    config.write_text(
        config.read_text().replace(
            "[spark.conf]\n",
            f'[spark.conf]\n"spark.eventLog.enabled" = "true"\n"spark.eventLog.compress" = "false"\n'
            f'"spark.eventLog.dir" = "file://{event_log}"\n',
            1,
        )
    )  # fmt: skip  - Spark's jobs give the parse and write passes' edges
    started = time.monotonic()
    count, raw = generate(project, source_id, args.messages, args.files, args.seed, args.input, args.hours)
    gz = sum(path.stat().st_size for path in (project / "lake" / "segment-logs").rglob("*.gz"))
    values, widest = flat_values(project)
    print(f"generated {count:,} messages of the {args.input} input ({raw / 1e9:.2f} GB of JSON, "
          f"{gz / 1e6:.0f} MB gzip) in {args.files} gzip files in {time.monotonic() - started:.0f} s: "
          f"{raw / count:,.0f} bytes and {values:.1f} flattened values per message, "
          f"widest table {widest} columns", flush=True)  # fmt: skip

    parsers = [name.strip() for name in args.parsers.split(",") if name.strip()]
    duck_walls: list[float] = []
    script = work / "duckdb_baseline.py"
    script.write_text(DUCKDB_SCRIPT)

    def duckdb_baseline(when: str) -> None:
        out = work / "duckdb-out"
        shutil.rmtree(out, ignore_errors=True)
        wall, duck_rss = timed(
            [sys.executable, str(script), str(project / "lake" / "segment-logs"), str(out)], work
        )
        duck_walls.append(wall)
        print(f"duckdb baseline ({when} eventlake's first run): {wall:.1f} s wall, "
              f"{count / wall:,.0f} msg/s, {raw / 1e6 / wall:.1f} MB/s, "
              f"peak RSS {duck_rss / 2**30:.2f} GiB", flush=True)  # fmt: skip

    runs: dict[str, SyncRun] = {}
    # each parser on a copy of the project as generated (its own metastore and ledger); DuckDB just
    # before and just after the first (the machine's speed moves by a quarter within the hour)
    for index, name in enumerate(parsers):
        if index == 0 and not args.skip_duckdb:
            duckdb_baseline("before")
        copy = work / f"project-{name}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(project, copy, symlinks=True)
        settings = copy / "eventlake.toml"
        text = settings.read_text().replace(str(event_log), str(event_log) + "-" + name)
        settings.write_text(text.replace("[sync]\n", f'[sync]\nparser = "{name}"\n', 1))
        print(f"eventlake sync, [sync] parser = {name!r}:", flush=True)
        run = runs[name] = sync_by_phase(copy, env, Path(str(event_log) + "-" + name))
        print(f"eventlake sync ({name}): {run.wall:.1f} s wall, {count / run.wall:,.0f} msg/s, "
              f"{raw / 1e6 / run.wall:.1f} MB/s, peak RSS {run.peak_rss / 2**30:.2f} GiB, "
              f"{run.cpu:.0f} CPU s", flush=True)  # fmt: skip
        run.report(count)
        if index == 0 and not args.skip_duckdb:
            duckdb_baseline("after")
    first = runs[parsers[0]]
    for name in parsers[1:]:
        other = runs[name]
        print(f"ratio ({name} / {parsers[0]}): wall {other.wall / first.wall:.2f}, "
              f"CPU {other.cpu / first.cpu:.2f}")  # fmt: skip
    spark_wall = first.wall
    if args.skip_duckdb:
        return
    duck_wall = sum(duck_walls) / len(duck_walls)
    print(f"ratio (duckdb wall / eventlake wall, {parsers[0]}): {duck_wall / spark_wall:.2f} "
          f"(DuckDB's mean of {len(duck_walls)} runs: {duck_wall:.1f} s; against each: "
          + ", ".join(f"{wall / spark_wall:.2f}" for wall in duck_walls) + ")")  # fmt: skip
    if args.skip_spark_floor:
        return
    out = work / "spark-out"
    event_log.mkdir(parents=True, exist_ok=True)  # the project's [spark.conf] writes Spark's event log there
    script = work / "spark_floor.py"
    script.write_text(SPARK_SCRIPT)
    floor_wall, floor_rss = timed(
        [sys.executable, str(script), str(project / "eventlake.toml"), str(project / "lake" / "segment-logs"),
         str(out)], work, env,
    )  # fmt: skip
    print(f"spark floor (DuckDB's job in Spark, no Python per message): {floor_wall:.1f} s wall, "
          f"{count / floor_wall:,.0f} msg/s, peak RSS {floor_rss / 2**30:.2f} GiB")  # fmt: skip
    print(f"ratio (duckdb wall / spark floor wall): {duck_wall / floor_wall:.2f}; "
          f"(spark floor wall / eventlake wall): {floor_wall / spark_wall:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
