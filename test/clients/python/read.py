"""Reads an Iggy partition with the unmodified `apache-iggy` Python SDK over TCP or HTTP, for tierd's e2e
suite: the same modes, options and output as test/sdk (the Rust client) and test/clients/java.

Run with the venv of the server's generation (scripts/install-python-clients.sh):
  py-iggy-0.8.0/bin/python read.py --server 127.0.0.1:8090 --stream S --topic T --mode offset ...
  py-iggy-0.9.0/bin/python read.py --transport http --server http://127.0.0.1:3000 ...

Modes (--mode):
  offset, first, timestamp  the first poll with that strategy, then `Offset(last + 1)`, no commit
  next       `PollingStrategy.Next()` with auto-commit as consumer --consumer (apache-iggy 0.8.0's
             `poll_messages` takes no consumer: it polls as the SDK's default consumer, id 0)
  group      the SDK's high-level consumer (`consumer_group(...)`, auto-create and auto-join,
             `AutoCommit.When(AutoCommitWhen.PollingMessages())`, no partition id), read with
             `iter_messages()` until --count messages or --idle-ms without one
Stops: --end N (offset N read), else the first empty poll; `next` and `group` also stop after
--idle-ms of nothing. Prints one JSON line per message and a summary line; see test/sdk/src/main.rs.
"""

import argparse
import asyncio
import datetime
import hashlib
import importlib.metadata
import json
import os
import sys
import time

import apache_iggy as iggy

SDK_VERSION = importlib.metadata.version("apache-iggy")
# 0.9 takes the consumer as a keyword argument; 0.8 has none.
POLL_TAKES_CONSUMER = hasattr(iggy, "Consumer")


def identifier(text):
    """A number is a numeric id, anything else a name (as the Rust SDK's `from_str_value`)."""
    return int(text) if text.isdigit() else text


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--transport", default="tcp", choices=["tcp", "http"])
    p.add_argument(
        "--server", required=True, help="host:port of the TCP listener; the base URL for HTTP"
    )
    p.add_argument("--username", default="iggy")
    p.add_argument("--password", default="iggy")
    p.add_argument("--stream", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, default=0)
    p.add_argument(
        "--mode", required=True, choices=["offset", "first", "next", "timestamp", "group"]
    )
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--timestamp", type=int, default=0)
    p.add_argument("--consumer")
    p.add_argument("--group")
    p.add_argument("--end", type=int)
    p.add_argument("--count", type=int)
    p.add_argument("--idle-ms", type=int, default=3000)
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--poll-interval-ms", type=int, default=0)
    p.add_argument("--payload", default="sha256", choices=["sha256", "hex"])
    return p.parse_args(argv)


def message_line(o, partition, m):
    payload = m.payload()
    line = {
        "type": "message",
        "partition": partition,
        "offset": m.offset(),
        "id": str(m.id()),
        "timestamp": m.timestamp(),
        "payload_len": len(payload),
    }
    if o.payload == "hex":
        line["payload_hex"] = payload.hex()
    else:
        line["payload_sha256"] = hashlib.sha256(payload).hexdigest()
    return json.dumps(line, separators=(",", ":"))


async def pause(o, empty):
    wait = max(o.poll_interval_ms, 50) if empty else o.poll_interval_ms
    if wait:
        await asyncio.sleep(wait / 1000)


async def poll(client, o, strategy, auto_commit):
    stream, topic = identifier(o.stream), identifier(o.topic)
    if POLL_TAKES_CONSUMER:
        consumer = iggy.Consumer.Single(identifier(o.consumer)) if o.consumer else None
        if consumer is None:
            consumer = iggy.Consumer.Single(0)
        return await client.poll_messages(
            stream,
            topic,
            consumer=consumer,
            polling_strategy=strategy,
            count=o.batch,
            auto_commit=auto_commit,
            partition_id=o.partition,
        )
    return await client.poll_messages(
        stream, topic, o.partition, strategy, o.batch, auto_commit
    )


async def read_partition(client, o, tally):
    """`first` strategy once, then the offset after the last message (or `Next` again)."""
    auto_commit = o.mode == "next"
    strategy = {
        "offset": lambda: iggy.PollingStrategy.Offset(o.offset),
        "first": lambda: iggy.PollingStrategy.First(),
        "timestamp": lambda: iggy.PollingStrategy.Timestamp(o.timestamp),
        "next": lambda: iggy.PollingStrategy.Next(),
    }[o.mode]()
    idle_since = time.monotonic()
    while True:
        messages = await poll(client, o, strategy, auto_commit)
        tally["polls"] += 1
        tally["partitions"].add(o.partition)
        for m in messages:
            print(message_line(o, o.partition, m), flush=True)
            tally["messages"] += 1
        if messages:
            idle_since = time.monotonic()
            last = messages[-1].offset()
            if o.end is not None and last >= o.end:
                return
            if not auto_commit:
                strategy = iggy.PollingStrategy.Offset(last + 1)
        elif o.end is None or time.monotonic() - idle_since >= o.idle_ms / 1000:
            return
        await pause(o, not messages)


async def read_group(client, o, tally):
    consumer = await client.consumer_group(
        o.group,
        o.stream,
        o.topic,
        polling_strategy=iggy.PollingStrategy.Next(),
        batch_length=o.batch,
        auto_commit=iggy.AutoCommit.When(iggy.AutoCommitWhen.PollingMessages()),
        create_consumer_group_if_not_exists=True,
        auto_join_consumer_group=True,
        poll_interval=datetime.timedelta(milliseconds=max(o.poll_interval_ms, 1)),
    )
    messages = consumer.iter_messages()
    while o.count is None or tally["messages"] < o.count:
        try:
            m = await asyncio.wait_for(messages.__anext__(), timeout=o.idle_ms / 1000)
        except (asyncio.TimeoutError, StopAsyncIteration):
            break
        partition = m.partition_id()
        tally["partitions"].add(partition)
        print(message_line(o, partition, m), flush=True)
        tally["messages"] += 1
    # The SDK keeps the offsets it stored itself; it has no call that reads them from the server.
    for p in sorted(tally["partitions"]):
        tally["stored"][str(p)] = consumer.get_last_stored_offset(p)


def make_client(o):
    """The SDK's client for --transport: its TCP client, or its HTTP client for the base URL."""
    if o.transport == "tcp":
        return iggy.IggyClient(o.server)
    if hasattr(iggy, "HttpConfig"):  # 0.9
        return iggy.IggyClient(iggy.HttpConfig(api_url=o.server))
    # 0.8 builds an HTTP client only from a connection string, which carries credentials
    # (it logs in with them on connect; the login below is then a second, harmless one).
    address = o.server.removeprefix("http://").rstrip("/")
    return iggy.IggyClient.from_connection_string(
        f"iggy+http://{o.username}:{o.password}@{address}"
    )


async def main(argv):
    o = parse_args(argv)
    if o.mode == "next" and o.end is None:
        raise SystemExit("read.py: --mode next needs --end")
    if o.mode == "group" and not o.group:
        raise SystemExit("read.py: --mode group needs --group")
    if o.mode == "group" and o.transport == "http":
        raise SystemExit("read.py: consumer groups need TCP (no Iggy SDK joins a group over HTTP)")
    client = make_client(o)
    await client.connect()
    await client.login_user(o.username, o.password)
    tally = {"messages": 0, "polls": 0, "partitions": set(), "stored": {}}
    if o.mode == "group":
        await read_group(client, o, tally)
        tally["polls"] = None  # the high-level consumer polls on its own
    else:
        await read_partition(client, o, tally)
    summary = {
        "type": "summary",
        "client": "python",
        "sdk": f"apache-iggy {SDK_VERSION}",
        "transport": o.transport,
        "mode": o.mode,
        "messages": tally["messages"],
        "polls": tally["polls"],
        "partitions": sorted(tally["partitions"]),
        "stored": tally["stored"],
    }
    print(json.dumps(summary, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1:]))
    except Exception as err:  # the driver shows stderr: say what failed in one line first
        print(f"read.py: {type(err).__name__}: {err}", file=sys.stderr)
        raise
    # The work is done and reported. Leave without the interpreter's teardown: apache-iggy 0.8.0
    # has aborted there (SIGABRT, exit 134, nothing on stderr) after the summary line was printed
    # whole — in about one run of four through tierd's binary front with four clients at once.
    # Its client runs a background heartbeat that may still be in flight as the loop closes.
    sys.stdout.flush()
    os._exit(0)
