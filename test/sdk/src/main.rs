//! An unmodified Iggy SDK client (the `iggy` crate's HTTP client) for tierd's e2e suite.
//!
//! `tierd-sdk-client URL USERNAME PASSWORD STREAM TOPIC PARTITION GROUP COUNT`
//! logs in, creates the consumer group GROUP, then polls partition PARTITION with that group,
//! `PollingStrategy::next()`, COUNT messages a poll and auto-commit until a poll answers none.
//! It prints `group ID`, then one line per message (`message OFFSET ID CHECKSUM TIMESTAMP ORIGIN PAYLOAD_LEN
//! FNV1A64(PAYLOAD) HEADERS`), then `polls N` and `stored OFFSET|none` as the SDK reads the
//! group's stored offset back.
//!
//! `tierd-sdk-client --token URL JWT STREAM TOPIC PARTITION` polls once with the given access
//! token instead of logging in, and prints `error CODE` (the SDK's error) or `messages N`.

use iggy::http::http_client::HttpClient;
use iggy::prelude::*;
use std::process::ExitCode;
use std::sync::Arc;

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

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = if args.get(1).map(String::as_str) == Some("--token") {
        poll_with_token(&args).await
    } else {
        read_with_group(&args).await
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tierd-sdk-client: {e}");
            ExitCode::FAILURE
        }
    }
}
