"""`make demo`: the whole product once, on embedded defaults, in ./demo-run.

1. `eventlake init` + three sources (web, ios, backend)
2. `eventlake serve` on a free port of 127.0.0.1
3. a realistic stream of a few thousand events of all six types, sent by Segment's own Python
   library (segment-analytics-python) pointed at the collector, including client retries
4. SIGTERM to the collector (it seals its spool into the raw archive)
5. `eventlake sync` (Spark): the tables created and their row counts
6. `eventlake sql`: messages per type for the web source today
7. `eventlake reports`
Leaves no process running.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

from segment.analytics import Client

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "demo-run"
EVENTLAKE = str(Path(sys.executable).parent / "eventlake")
SOURCES = {"web": "wk_demo_web", "ios": "wk_demo_ios", "backend": "wk_demo_backend"}
PRODUCTS = [
    ("sku-1", "Trail Shoes", 89.99),
    ("sku-2", "Rain Jacket", 129.5),
    ("sku-3", "Socks (3 pack)", 12.0),
    ("sku-4", "Headlamp", 34.25),
    ("sku-5", "Water Bottle", 18.0),
]
PAGES = [
    ("/", "Home"),
    ("/shop", "Shop"),
    ("/shop/shoes", "Shoes"),
    ("/cart", "Cart"),
    ("/blog/trails", "Blog"),
]


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def eventlake(*args: str, capture: bool = False) -> str:
    result = subprocess.run(
        [EVENTLAKE, *args], cwd=RUN, check=True, text=True, stdout=subprocess.PIPE if capture else None
    )
    return result.stdout if capture else ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_page(url: str, process: subprocess.Popen) -> str:
    """A page of the web console, once it answers with the lake read."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                page = response.read().decode()
            if "lake read 20" in page:  # the console has read the lake once
                return page
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the console did not answer at {url}")


def wait_healthy(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the collector exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the collector did not start within 30 s")


def send_stream(url: str, rng: random.Random) -> dict[str, int]:
    """A day of a small shop: visitors browse, sign up, buy; the app and the backend report too."""
    errors: list[str] = []
    clients = {
        slug: Client(key, host=url, gzip=True, upload_size=100, on_error=lambda e, _: errors.append(str(e)))
        for slug, key in SOURCES.items()
    }
    web, ios, backend = clients["web"], clients["ios"], clients["backend"]
    sent = {slug: 0 for slug in SOURCES}
    now = datetime.now(timezone.utc)
    for visitor in range(400):
        anonymous_id = f"anon-{visitor:04d}"
        user_id = f"user-{visitor:04d}" if visitor % 3 else None
        context = {
            "ip": f"203.0.113.{visitor % 250}",
            "locale": rng.choice(["en-US", "nl-NL", "de-DE"]),
            "userAgent": "Mozilla/5.0 (X11; Linux x86_64)",
            "campaign": {"source": rng.choice(["newsletter", "ads", "organic"]), "medium": "email"},
        }
        at = now - timedelta(minutes=rng.randint(0, 600))
        for path, title in rng.sample(PAGES, rng.randint(1, 4)):
            web.page(
                anonymous_id=anonymous_id,
                user_id=user_id,
                name=title,
                category="Shop",
                properties={"path": path, "url": f"https://shop.example{path}", "title": title},
                context={**context, "page": {"path": path}},
                timestamp=at,
            )
            sent["web"] += 1
        for sku, name, price in rng.sample(PRODUCTS, rng.randint(0, 3)):
            web.track(
                anonymous_id=anonymous_id,
                user_id=user_id,
                event="Product Viewed",
                properties={"product_id": sku, "name": name, "price": price, "currency": "EUR"},
                context=context,
                timestamp=at,
            )
            sent["web"] += 1
        if user_id is None:
            continue
        web.identify(
            user_id=user_id,
            anonymous_id=anonymous_id,
            context=context,
            traits={
                "email": f"{user_id}@example.com",
                "plan": rng.choice(["free", "pro"]),
                "age": rng.randint(18, 70),
                "newsletter": rng.random() < 0.5,
                "address": {"city": rng.choice(["Amsterdam", "Berlin", "Austin"]), "country": "NL"},
            },
        )
        web.alias(previous_id=anonymous_id, user_id=user_id, timestamp=at)
        sent["web"] += 2
        if rng.random() < 0.4:
            items = rng.sample(PRODUCTS, rng.randint(1, 3))
            order = {
                "order_id": f"o-{visitor:05d}",
                "revenue": round(sum(p for _, _, p in items), 2),
                "currency": "EUR",
                "coupon": rng.choice([None, "WINTER10"]),
                "products": [{"product_id": s, "name": n, "price": p} for s, n, p in items],
            }
            web.track(
                user_id=user_id,
                event="Order Completed",
                properties=order,
                context=context,
                timestamp=at,
                message_id=f"order-{visitor}",
            )
            # a flaky network: the same order sent again with the same messageId (deduplicated by the sync)
            if rng.random() < 0.2:
                web.track(
                    user_id=user_id,
                    event="Order Completed",
                    properties=order,
                    context=context,
                    timestamp=at,
                    message_id=f"order-{visitor}",
                )
                sent["web"] += 1
            backend.track(
                user_id=user_id,
                event="Payment Captured",
                properties={"order_id": order["order_id"], "amount": order["revenue"], "psp": "acme"},
            )
            backend.group(
                user_id=user_id,
                group_id=f"team-{visitor % 20}",
                traits={"name": f"Team {visitor % 20}", "employees": rng.randint(2, 500)},
            )
            sent["web"] += 1
            sent["backend"] += 2
        for _ in range(rng.randint(0, 3)):
            screen = rng.choice(["Home", "Product", "Checkout"])
            ios.screen(
                user_id=user_id,
                name=screen,
                properties={"duration_ms": rng.randint(100, 9000)},
                context={"device": {"model": "iPhone15,2", "type": "ios"}, "app": {"version": "3.2.1"}},
            )
            ios.track(user_id=user_id, event="App Opened", properties={"from_background": rng.random() < 0.5})
            sent["ios"] += 2
    for client in clients.values():
        client.flush()
        client.join()
    if errors:
        raise SystemExit(f"the Segment client reported errors: {errors[:3]}")
    return sent


def main() -> None:
    started = time.monotonic()
    shutil.rmtree(RUN, ignore_errors=True)
    RUN.parent.mkdir(exist_ok=True)
    step("eventlake init demo-run, three sources")
    subprocess.run([EVENTLAKE, "init", str(RUN)], check=True)
    for slug, key in SOURCES.items():
        eventlake("sources", "add", slug, "--write-key", key)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    step(f"eventlake serve --port {port}")
    collector = subprocess.Popen([EVENTLAKE, "serve", "--port", str(port)], cwd=RUN)
    try:
        wait_healthy(url, collector)
        step("sending events with segment-analytics-python")
        sent = send_stream(url, random.Random(42))
        print(", ".join(f"{slug}: {n} messages" for slug, n in sent.items()), f"(total {sum(sent.values())})")
    finally:
        collector.send_signal(signal.SIGTERM)  # graceful stop: seals the spool into the archive
        collector.wait(30)
    archive = sorted((RUN / "lake" / "segment-logs").rglob("*.gz"))
    print(f"raw archive: {len(archive)} sealed files, e.g. {archive[0].relative_to(RUN)}")

    step("eventlake sync")
    sync_started = time.monotonic()
    synced = json.loads(eventlake("sync", "--format", "json", capture=True))
    sync_seconds = time.monotonic() - sync_started
    print(f"{'table':40} {'rows':>6}")
    for row in synced:
        print(f"{row['table']:40} {row['rows']:>6}")
    print(f"sync took {sync_seconds:.0f} s (Spark start included)")

    step("eventlake sql: messages per type for the web source today")
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    web_tables = [row["table"] for row in synced if row["source"] == "web"]
    query = " UNION ALL ".join(
        f"SELECT '{table.split('.', 1)[1]}' AS segment_type, count(*) AS messages "
        f"FROM {table} WHERE day = '{today}'"
        for table in web_tables
    )
    print(f"-- {query[:150]} ...")
    eventlake("sql", f"SELECT * FROM ({query}) ORDER BY messages DESC")

    step("eventlake reports")
    eventlake("reports")

    console_port = free_port()
    step(f"eventlake console --port {console_port}  (eventlake up serves it too)")
    console = subprocess.Popen([EVENTLAKE, "console", "--port", str(console_port)], cwd=RUN)
    try:
        page = wait_for_page(f"http://127.0.0.1:{console_port}/runs", console)
        runs = page.count('<tr><td><a href="/runs/')
        tables = wait_for_page(f"http://127.0.0.1:{console_port}/schemas", console).count('href="/schemas/')
        print(
            f"the web console shows {runs} sync runs and {tables} tables at http://127.0.0.1:{console_port}/"
        )
    finally:
        console.send_signal(signal.SIGTERM)
        console.wait(30)
    print(
        f"\ndemo finished in {time.monotonic() - started:.0f} s; the project is in {RUN.relative_to(ROOT)}/ "
        f'(try: cd {RUN.relative_to(ROOT)} && {EVENTLAKE} sql "SHOW TABLES IN web")'
    )


if __name__ == "__main__":
    main()
