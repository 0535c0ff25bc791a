//! An unmodified Iggy SDK client (the `iggy` crate, over TCP or HTTP) for tierd's e2e suite. The
//! same source builds against iggy 0.10.0 (test/sdk, Iggy 0.8 servers) and 0.11.0-edge.4
//! (test/sdk/iggy-0.11, Iggy 0.9.0-edge.5's VSR-framed TCP protocol); see
//! scripts/build-sdk-client.sh.
//!
//! `tierd-sdk-client read --server ADDR --stream S --topic T --mode MODE [options]` reads a
//! partition and prints one JSON line per message read, then one summary line: the same modes,
//! options and output as test/clients/python/read.py and test/clients/java (all driven by
//! test/e2e/_iggy_clients.ts). Options:
//!   --transport tcp|http  (default tcp)
//!   --server ADDR         `127.0.0.1:8090` for tcp, `http://127.0.0.1:3000` for http
//!   --username U --password P   (default iggy/iggy)
//!   --stream S --topic T  a number is a numeric id, anything else a name
//!   --partition P         (default 0; ignored by `group`)
//!   --mode offset|first|next|timestamp|group|stored
//!   --offset N            `offset`: the first offset to read
//!   --timestamp US        `timestamp`: µs since the epoch
//!   --consumer NAME       `next`, `stored`: the named consumer (`offset`, `first` and
//!                         `timestamp` poll as it too, never committing; default consumer 0)
//!   --group NAME          `group`, `stored`: the consumer group
//!   --end N               stop once offset N has been read (`next` needs it; `offset`, `first`
//!                         and `timestamp` stop at the first empty poll without it)
//!   --count N             `group`: stop after N messages in all
//!   --idle-ms N           with --end, and in `group`: stop after N ms of empty polls (3000)
//!   --batch N             messages per poll (default 10)
//!   --poll-interval-ms N  pause after each poll (default 0; at least 50 after an empty one)
//!   --payload sha256|hex  how payloads are printed (default sha256)
//!
//! Modes: `offset`, `first` and `timestamp` make their first poll with that strategy and go on
//! with `offset(last + 1)`, auto-commit off; `next` polls `PollingStrategy::next()` with
//! auto-commit as the named consumer; `group` creates the group when missing, joins it
//! (`join_consumer_group`) and polls `next()` with auto-commit and no partition id, so the
//! server picks the partition; `stored` only reads a consumer's or group's stored offset.
//!
//! A message line: `{"type":"message","partition":P,"offset":O,"id":"U128","timestamp":US,
//! "payload_len":N,"payload_sha256":"…"}` (or `"payload_hex"`). The summary line:
//! `{"type":"summary","client":"rust","sdk":"iggy 0.10.0","transport":"tcp","mode":…,
//! "messages":N,"polls":N,"partitions":[…],"stored":{"P":O|null}}`, the stored offsets read back
//! from the server per partition read (`next`: the consumer's; `group`, `stored`: the group's or
//! the consumer's).
//!
//! The older HTTP-only forms stay as they were for test/e2e/_iggy_sdk.ts:
//! `tierd-sdk-client URL USERNAME PASSWORD STREAM TOPIC PARTITION GROUP COUNT` logs in, creates
//! the consumer group GROUP, then polls partition PARTITION with that group,
//! `PollingStrategy::next()`, COUNT messages a poll and auto-commit until a poll answers none.
//! It prints `group ID`, then one line per message (`message OFFSET ID CHECKSUM TIMESTAMP ORIGIN
//! PAYLOAD_LEN FNV1A64(PAYLOAD) HEADERS`), then `polls N` and `stored OFFSET|none` as the SDK
//! reads the group's stored offset back.
//!
//! `tierd-sdk-client --token URL JWT STREAM TOPIC PARTITION` polls once with the given access
//! token instead of logging in, and prints `error CODE` (the SDK's error) or `messages N`.

use iggy::http::http_client::HttpClient;
use iggy::prelude::*;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// FNV-1a 64 of the payload: tierd's test computes the same to compare payloads.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn arg(args: &[String], i: usize, what: &str) -> Result<String, String> {
    args.get(i).cloned().ok_or_else(|| format!("missing argument {i}: {what}"))
}

fn num(args: &[String], i: usize, what: &str) -> Result<u32, String> {
    arg(args, i, what)?.parse().map_err(|_| format!("argument {i} ({what}) is not a number"))
}

async fn read_with_group(args: &[String]) -> Result<(), String> {
    let url = arg(args, 1, "url")?;
    let username = arg(args, 2, "username")?;
    let password = arg(args, 3, "password")?;
    let stream = Identifier::numeric(num(args, 4, "stream")?).map_err(|e| e.to_string())?;
    let topic = Identifier::numeric(num(args, 5, "topic")?).map_err(|e| e.to_string())?;
    let partition = num(args, 6, "partition")?;
    let group = arg(args, 7, "group")?;
    let count = num(args, 8, "count")?;

    let client = HttpClient::new(&url).map_err(|e| format!("client: {e}"))?;
    client.login_user(&username, &password).await.map_err(|e| format!("login: {e}"))?;
    let details = client
        .create_consumer_group(&stream, &topic, &group)
        .await
        .map_err(|e| format!("create consumer group: {e}"))?;
    println!("group {}", details.id);
    let consumer = Consumer::group(Identifier::numeric(details.id).map_err(|e| e.to_string())?);
    let mut polls = 0u32;
    loop {
        let polled = client
            .poll_messages(
                &stream,
                &topic,
                Some(partition),
                &consumer,
                &PollingStrategy::next(),
                count,
                true,
            )
            .await
            .map_err(|e| format!("poll {polls}: {e}"))?;
        polls += 1;
        if polled.messages.is_empty() {
            break;
        }
        for m in &polled.messages {
            let headers = m.user_headers_map().ok().flatten().map_or(0, |h| h.len());
            println!(
                "message {} {} {} {} {} {} {} {}",
                m.header.offset,
                m.header.id,
                m.header.checksum,
                m.header.timestamp,
                m.header.origin_timestamp,
                m.payload.len(),
                fnv1a64(&m.payload),
                headers
            );
        }
    }
    println!("polls {polls}");
    let stored = client
        .get_consumer_offset(&consumer, &stream, &topic, Some(partition))
        .await
        .map_err(|e| format!("get consumer offset: {e}"))?;
    match stored {
        Some(info) => println!("stored {}", info.stored_offset),
        None => println!("stored none"),
    }
    Ok(())
}

async fn poll_with_token(args: &[String]) -> Result<(), String> {
    let url = arg(args, 2, "url")?;
    let jwt = arg(args, 3, "jwt")?;
    let stream = Identifier::numeric(num(args, 4, "stream")?).map_err(|e| e.to_string())?;
    let topic = Identifier::numeric(num(args, 5, "topic")?).map_err(|e| e.to_string())?;
    let partition = num(args, 6, "partition")?;
    let config = HttpClientConfig { api_url: url, retries: 0, jwt: Some(jwt) };
    let client = HttpClient::create(Arc::new(config)).map_err(|e| format!("client: {e}"))?;
    let consumer = Consumer::new(Identifier::numeric(1).map_err(|e| e.to_string())?);
    match client
        .poll_messages(
            &stream,
            &topic,
            Some(partition),
            &consumer,
            &PollingStrategy::offset(0),
            10,
            false,
        )
        .await
    {
        Ok(polled) => println!("messages {}", polled.messages.len()),
        Err(e) => println!("error {}", e.as_string()),
    }
    Ok(())
}

/// The options of `read`, parsed from `--name value` pairs.
struct ReadOptions {
    transport: String,
    server: String,
    username: String,
    password: String,
    stream: Identifier,
    topic: Identifier,
    partition: u32,
    mode: String,
    offset: u64,
    timestamp: u64,
    consumer: Option<String>,
    group: Option<String>,
    end: Option<u64>,
    count: Option<u64>,
    idle: Duration,
    batch: u32,
    poll_interval: Duration,
    hex: bool,
}

fn parse_read(args: &[String]) -> Result<ReadOptions, String> {
    let mut given = BTreeMap::new();
    let mut rest = args.iter();
    while let Some(name) = rest.next() {
        let key = name.strip_prefix("--").ok_or_else(|| format!("unexpected argument {name}"))?;
        let value = rest.next().ok_or_else(|| format!("{name} needs a value"))?;
        given.insert(key.to_string(), value.clone());
    }
    let text = |k: &str| given.get(k).cloned();
    let need = |k: &str| text(k).ok_or_else(|| format!("--{k} is required"));
    let number = |k: &str, default: u64| -> Result<u64, String> {
        text(k).map_or(Ok(default), |v| v.parse().map_err(|_| format!("--{k} {v}: not a number")))
    };
    let ident = |k: &str| -> Result<Identifier, String> {
        let v = need(k)?;
        Identifier::from_str_value(&v).map_err(|e| format!("--{k} {v}: {e}"))
    };
    let known = [
        "transport",
        "server",
        "username",
        "password",
        "stream",
        "topic",
        "partition",
        "mode",
        "offset",
        "timestamp",
        "consumer",
        "group",
        "end",
        "count",
        "idle-ms",
        "batch",
        "poll-interval-ms",
        "payload",
    ];
    if let Some(unknown) = given.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!("unknown option --{unknown}"));
    }
    let payload = text("payload").unwrap_or_else(|| "sha256".into());
    if payload != "sha256" && payload != "hex" {
        return Err(format!("--payload {payload}: sha256 or hex"));
    }
    Ok(ReadOptions {
        transport: text("transport").unwrap_or_else(|| "tcp".into()),
        server: need("server")?,
        username: text("username").unwrap_or_else(|| "iggy".into()),
        password: text("password").unwrap_or_else(|| "iggy".into()),
        stream: ident("stream")?,
        topic: ident("topic")?,
        partition: u32::try_from(number("partition", 0)?).map_err(|e| e.to_string())?,
        mode: need("mode")?,
        offset: number("offset", 0)?,
        timestamp: number("timestamp", 0)?,
        consumer: text("consumer"),
        group: text("group"),
        end: text("end").map(|_| number("end", 0)).transpose()?,
        count: text("count").map(|_| number("count", 0)).transpose()?,
        idle: Duration::from_millis(number("idle-ms", 3000)?),
        batch: u32::try_from(number("batch", 10)?).map_err(|e| e.to_string())?,
        poll_interval: Duration::from_millis(number("poll-interval-ms", 0)?),
        hex: payload == "hex",
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn message_line(partition: u32, m: &IggyMessage, as_hex: bool) -> String {
    let mut line = Map::new();
    line.insert("type".into(), json!("message"));
    line.insert("partition".into(), json!(partition));
    line.insert("offset".into(), json!(m.header.offset));
    line.insert("id".into(), json!(m.header.id.to_string()));
    line.insert("timestamp".into(), json!(m.header.timestamp));
    line.insert("payload_len".into(), json!(m.payload.len()));
    if as_hex {
        line.insert("payload_hex".into(), json!(hex(&m.payload)));
    } else {
        line.insert("payload_sha256".into(), json!(hex(&Sha256::digest(&m.payload))));
    }
    Value::Object(line).to_string()
}

async fn connect(o: &ReadOptions) -> Result<Box<dyn Client>, String> {
    let client: Box<dyn Client> = match o.transport.as_str() {
        "tcp" => {
            let config = TcpClientConfig { server_address: o.server.clone(), ..Default::default() };
            Box::new(TcpClient::create(Arc::new(config)).map_err(|e| format!("tcp client: {e}"))?)
        }
        "http" => Box::new(HttpClient::new(&o.server).map_err(|e| format!("http client: {e}"))?),
        other => return Err(format!("--transport {other}: tcp or http")),
    };
    client.connect().await.map_err(|e| format!("connect to {}: {e}", o.server))?;
    client.login_user(&o.username, &o.password).await.map_err(|e| format!("login: {e}"))?;
    Ok(client)
}

/// What a read saw, for the summary line.
#[derive(Default)]
struct Tally {
    messages: u64,
    polls: u64,
    partitions: BTreeSet<u32>,
}

async fn read(args: &[String]) -> Result<(), String> {
    let o = parse_read(args)?;
    let client = connect(&o).await?;
    let named = |what: &str, name: &Option<String>| -> Result<Identifier, String> {
        let name = name.as_deref().ok_or_else(|| format!("--mode {} needs --{what}", o.mode))?;
        Identifier::from_str_value(name).map_err(|e| format!("--{what} {name}: {e}"))
    };
    let mut tally = Tally::default();
    let stored_of: Option<Consumer> = match o.mode.as_str() {
        "offset" | "first" | "timestamp" => {
            let consumer = match &o.consumer {
                Some(_) => Consumer::new(named("consumer", &o.consumer)?),
                None => Consumer::default(),
            };
            let first = match o.mode.as_str() {
                "offset" => PollingStrategy::offset(o.offset),
                "first" => PollingStrategy::first(),
                _ => PollingStrategy::timestamp(o.timestamp.into()),
            };
            read_partition(&*client, &o, &consumer, first, false, &mut tally).await?;
            None
        }
        "next" => {
            if o.end.is_none() {
                return Err("--mode next needs --end".into());
            }
            let consumer = Consumer::new(named("consumer", &o.consumer)?);
            read_partition(&*client, &o, &consumer, PollingStrategy::next(), true, &mut tally)
                .await?;
            Some(consumer)
        }
        "group" => {
            let group = named("group", &o.group)?;
            read_group(&*client, &o, &group, &mut tally).await?;
            Some(Consumer::group(group))
        }
        "stored" => {
            tally.partitions.insert(o.partition);
            Some(match &o.group {
                Some(_) => Consumer::group(named("group", &o.group)?),
                None => Consumer::new(named("consumer", &o.consumer)?),
            })
        }
        other => {
            return Err(format!("--mode {other}: offset, first, next, timestamp, group or stored"));
        }
    };
    let mut stored = Map::new();
    if let Some(consumer) = &stored_of {
        for p in &tally.partitions {
            let info = client
                .get_consumer_offset(consumer, &o.stream, &o.topic, Some(*p))
                .await
                .map_err(|e| format!("get consumer offset of partition {p}: {e}"))?;
            stored.insert(p.to_string(), info.map_or(Value::Null, |i| json!(i.stored_offset)));
        }
    }
    println!(
        "{}",
        json!({
            "type": "summary",
            "client": "rust",
            "sdk": env!("CARGO_PKG_DESCRIPTION"),
            "transport": o.transport,
            "mode": o.mode,
            "messages": tally.messages,
            "polls": tally.polls,
            "partitions": tally.partitions,
            "stored": stored,
        })
    );
    let _ = client.shutdown().await;
    Ok(())
}

/// Polls one partition: `first` strategy once, then `next` (when committing) or the offset after
/// the last message read, until `--end` is read, a poll answers none (without `--end`), or the
/// polls have been empty for `--idle-ms`.
async fn read_partition(
    client: &dyn Client,
    o: &ReadOptions,
    consumer: &Consumer,
    first: PollingStrategy,
    auto_commit: bool,
    tally: &mut Tally,
) -> Result<(), String> {
    let mut strategy = first;
    let mut idle_since = Instant::now();
    loop {
        let polled = client
            .poll_messages(
                &o.stream,
                &o.topic,
                Some(o.partition),
                consumer,
                &strategy,
                o.batch,
                auto_commit,
            )
            .await
            .map_err(|e| format!("poll {} ({strategy:?}): {e}", tally.polls))?;
        tally.polls += 1;
        tally.partitions.insert(o.partition);
        for m in &polled.messages {
            println!("{}", message_line(o.partition, m, o.hex));
            tally.messages += 1;
        }
        if let Some(last) = polled.messages.last() {
            idle_since = Instant::now();
            if o.end.is_some_and(|end| last.header.offset >= end) {
                return Ok(());
            }
            if !auto_commit {
                strategy = PollingStrategy::offset(last.header.offset + 1);
            }
        } else if o.end.is_none() || idle_since.elapsed() >= o.idle {
            return Ok(());
        }
        pause(o, polled.messages.is_empty()).await;
    }
}

/// Creates the group when missing (another member may win that race), joins it and polls
/// `next()` with auto-commit and no partition id until `--count` messages or `--idle-ms`.
async fn read_group(
    client: &dyn Client,
    o: &ReadOptions,
    group: &Identifier,
    tally: &mut Tally,
) -> Result<(), String> {
    let name = group.get_string_value().map_err(|e| format!("group: {e}"))?;
    match client.create_consumer_group(&o.stream, &o.topic, &name).await {
        Ok(_) | Err(IggyError::ConsumerGroupNameAlreadyExists(..)) => {}
        Err(e) => return Err(format!("create consumer group {name}: {e}")),
    }
    client
        .join_consumer_group(&o.stream, &o.topic, group)
        .await
        .map_err(|e| format!("join consumer group {name}: {e}"))?;
    let consumer = Consumer::group(group.clone());
    let mut idle_since = Instant::now();
    loop {
        let polled = client
            .poll_messages(
                &o.stream,
                &o.topic,
                None,
                &consumer,
                &PollingStrategy::next(),
                o.batch,
                true,
            )
            .await
            .map_err(|e| format!("poll {}: {e}", tally.polls))?;
        tally.polls += 1;
        if !polled.messages.is_empty() {
            tally.partitions.insert(polled.partition_id);
            idle_since = Instant::now();
        }
        for m in &polled.messages {
            println!("{}", message_line(polled.partition_id, m, o.hex));
            tally.messages += 1;
        }
        if o.count.is_some_and(|c| tally.messages >= c) || idle_since.elapsed() >= o.idle {
            return Ok(());
        }
        pause(o, polled.messages.is_empty()).await;
    }
}

async fn pause(o: &ReadOptions, empty: bool) {
    let wait = if empty { o.poll_interval.max(Duration::from_millis(50)) } else { o.poll_interval };
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("--token") => poll_with_token(&args).await,
        Some("read") => read(&args[2..]).await,
        _ => read_with_group(&args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tierd-sdk-client: {e}");
            ExitCode::FAILURE
        }
    }
}
