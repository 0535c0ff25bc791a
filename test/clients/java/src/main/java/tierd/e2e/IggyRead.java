// Reads an Iggy partition with the unmodified Apache Iggy Java SDK (org.apache.iggy:iggy 0.8.0,
// its blocking TCP client, or its blocking HTTP client with --transport http) for tierd's e2e
// suite: the same modes, options and output as test/sdk/src/main.rs (the Rust client, whose
// header documents them) and test/clients/python/read.py.
//
//   java -jar iggy-read.jar --server 127.0.0.1:8090 --stream S --topic T --mode offset ...
//   java -jar iggy-read.jar --transport http --server http://127.0.0.1:3000 ...
//
// Modes: offset, first and timestamp poll with that strategy first, then offset(last + 1), no
// commit; next polls PollingStrategy.next() with auto-commit as consumer --consumer; group
// creates the group when missing, joins it (joinConsumerGroup) and polls next() with
// auto-commit and no partition id, so the server picks the partition; stored only reads the
// stored offset of --consumer or --group in --partition.
package tierd.e2e;

import java.math.BigInteger;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.TreeSet;
import java.io.Closeable;
import org.apache.iggy.client.blocking.IggyBaseClient;
import org.apache.iggy.client.blocking.http.IggyHttpClient;
import org.apache.iggy.client.blocking.tcp.IggyTcpClient;
import org.apache.iggy.consumergroup.Consumer;
import org.apache.iggy.consumeroffset.ConsumerOffsetInfo;
import org.apache.iggy.exception.IggyErrorCode;
import org.apache.iggy.exception.IggyServerException;
import org.apache.iggy.identifier.ConsumerId;
import org.apache.iggy.identifier.StreamId;
import org.apache.iggy.identifier.TopicId;
import org.apache.iggy.message.Message;
import org.apache.iggy.message.PolledMessages;
import org.apache.iggy.message.PollingStrategy;

public final class IggyRead {
    private static final String SDK = "org.apache.iggy:iggy 0.8.0";

    private final Map<String, String> options;
    private final IggyBaseClient client;
    private final StreamId stream;
    private final TopicId topic;
    private final long partition;
    private final String mode;
    private final long batch;
    private final long idleMillis;
    private final long pollIntervalMillis;
    private final boolean hex;
    private long messages;
    private long polls;
    private final TreeSet<Long> partitions = new TreeSet<>();

    private final String transport;

    private IggyRead(Map<String, String> options, IggyBaseClient client) {
        this.options = options;
        this.client = client;
        this.transport = options.getOrDefault("transport", "tcp");
        String s = need("stream");
        String t = need("topic");
        this.stream = isNumber(s) ? StreamId.of(Long.parseLong(s)) : StreamId.of(s);
        this.topic = isNumber(t) ? TopicId.of(Long.parseLong(t)) : TopicId.of(t);
        this.partition = number("partition", 0);
        this.mode = need("mode");
        this.batch = number("batch", 10);
        this.idleMillis = number("idle-ms", 3000);
        this.pollIntervalMillis = number("poll-interval-ms", 0);
        String payload = options.getOrDefault("payload", "sha256");
        if (!payload.equals("sha256") && !payload.equals("hex")) {
            throw new IllegalArgumentException("--payload " + payload + ": sha256 or hex");
        }
        this.hex = payload.equals("hex");
    }

    public static void main(String[] args) throws Exception {
        // The SDK's INFO lines (pool set-up, logins) would only crowd stderr.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        Map<String, String> options = parse(args);
        String server = options.get("server");
        if (server == null || !server.contains(":")) {
            throw new IllegalArgumentException("--server host:port (or an HTTP base URL) is required");
        }
        String username = options.getOrDefault("username", "iggy");
        String password = options.getOrDefault("password", "iggy");
        String transport = options.getOrDefault("transport", "tcp");
        IggyBaseClient client;
        switch (transport) {
            case "tcp" -> {
                int colon = server.lastIndexOf(':');
                client = IggyTcpClient.builder()
                        .host(server.substring(0, colon))
                        .port(Integer.parseInt(server.substring(colon + 1)))
                        .credentials(username, password)
                        .buildAndLogin();
            }
            case "http" -> {
                if (options.getOrDefault("mode", "").equals("group")) {
                    throw new IllegalArgumentException("--mode group needs TCP: no Iggy SDK joins a group over HTTP");
                }
                client = IggyHttpClient.builder().url(server).credentials(username, password).buildAndLogin();
            }
            default -> throw new IllegalArgumentException("--transport " + transport + ": tcp or http");
        }
        try {
            new IggyRead(options, client).run();
        } finally {
            ((Closeable) client).close();
        }
        System.out.flush();
        // Netty's event-loop threads would keep the JVM up a little longer.
        System.exit(0);
    }

    private void run() throws InterruptedException {
        Optional<Consumer> storedOf;
        switch (mode) {
            case "offset" -> {
                readPartition(PollingStrategy.offset(BigInteger.valueOf(number("offset", 0))), false);
                storedOf = Optional.empty();
            }
            case "first" -> {
                readPartition(PollingStrategy.first(), false);
                storedOf = Optional.empty();
            }
            case "timestamp" -> {
                readPartition(PollingStrategy.timestamp(BigInteger.valueOf(number("timestamp", 0))), false);
                storedOf = Optional.empty();
            }
            case "next" -> {
                need("end");
                readPartition(PollingStrategy.next(), true);
                storedOf = Optional.of(consumer());
            }
            case "group" -> {
                readGroup();
                storedOf = Optional.of(Consumer.group(ConsumerId.of(need("group"))));
            }
            case "stored" -> {
                partitions.add(partition);
                storedOf = Optional.of(
                        options.containsKey("group") ? Consumer.group(ConsumerId.of(need("group"))) : consumer());
            }
            default -> throw new IllegalArgumentException(
                    "--mode " + mode + ": offset, first, next, timestamp, group or stored");
        }
        Map<String, String> stored = new TreeMap<>();
        if (storedOf.isPresent()) {
            for (long p : partitions) {
                Optional<ConsumerOffsetInfo> info =
                        client.consumerOffsets().getConsumerOffset(stream, topic, Optional.of(p), storedOf.get());
                stored.put(String.valueOf(p), info.map(i -> i.storedOffset().toString()).orElse("null"));
            }
        }
        List<String> storedJson = new ArrayList<>();
        stored.forEach((p, o) -> storedJson.add("\"" + p + "\":" + o));
        System.out.println("{\"type\":\"summary\",\"client\":\"java\",\"sdk\":\"" + SDK + "\",\"transport\":\"" + transport + "\","
                + "\"mode\":\"" + mode + "\",\"messages\":" + messages + ",\"polls\":" + polls
                + ",\"partitions\":" + partitions.toString().replace(" ", "")
                + ",\"stored\":{" + String.join(",", storedJson) + "}}");
    }

    /** The named consumer of --consumer, else the SDK's consumer 0 (as the Rust client's default). */
    private Consumer consumer() {
        String name = options.get("consumer");
        if (name == null) {
            if (mode.equals("next") || mode.equals("stored")) {
                throw new IllegalArgumentException("--mode " + mode + " needs --consumer");
            }
            return Consumer.of(0L);
        }
        return Consumer.of(isNumber(name) ? ConsumerId.of(Long.parseLong(name)) : ConsumerId.of(name));
    }

    private void readPartition(PollingStrategy first, boolean autoCommit) throws InterruptedException {
        Consumer consumer = consumer();
        Optional<Long> end = options.containsKey("end") ? Optional.of(number("end", 0)) : Optional.empty();
        PollingStrategy strategy = first;
        long idleSince = System.nanoTime();
        for (; ; ) {
            PolledMessages polled = client.messages()
                    .pollMessages(stream, topic, Optional.of(partition), consumer, strategy, batch, autoCommit);
            polls++;
            partitions.add(partition);
            for (Message m : polled.messages()) {
                print(partition, m);
            }
            if (!polled.messages().isEmpty()) {
                idleSince = System.nanoTime();
                BigInteger last = polled.messages().get(polled.messages().size() - 1).header().offset();
                if (end.isPresent() && last.compareTo(BigInteger.valueOf(end.get())) >= 0) {
                    return;
                }
                if (!autoCommit) {
                    strategy = PollingStrategy.offset(last.add(BigInteger.ONE));
                }
            } else if (end.isEmpty() || (System.nanoTime() - idleSince) / 1_000_000 >= idleMillis) {
                return;
            }
            pause(polled.messages().isEmpty());
        }
    }

    private void readGroup() throws InterruptedException {
        String name = need("group");
        long count = number("count", Long.MAX_VALUE);
        try {
            client.consumerGroups().createConsumerGroup(stream, topic, name);
        } catch (IggyServerException e) {
            if (e.getErrorCode() != IggyErrorCode.CONSUMER_GROUP_ALREADY_EXISTS) {
                throw e;
            }
        }
        ConsumerId group = ConsumerId.of(name);
        client.consumerGroups().joinConsumerGroup(stream, topic, group);
        Consumer consumer = Consumer.group(group);
        long idleSince = System.nanoTime();
        for (; ; ) {
            PolledMessages polled = client.messages()
                    .pollMessages(stream, topic, Optional.empty(), consumer, PollingStrategy.next(), batch, true);
            polls++;
            if (!polled.messages().isEmpty()) {
                partitions.add(polled.partitionId());
                idleSince = System.nanoTime();
            }
            for (Message m : polled.messages()) {
                print(polled.partitionId(), m);
            }
            if (messages >= count || (System.nanoTime() - idleSince) / 1_000_000 >= idleMillis) {
                return;
            }
            pause(polled.messages().isEmpty());
        }
    }

    private void print(long partitionId, Message m) {
        byte[] payload = m.payload();
        String body = hex
                ? "\"payload_hex\":\"" + HexFormat.of().formatHex(payload) + "\""
                : "\"payload_sha256\":\"" + HexFormat.of().formatHex(sha256(payload)) + "\"";
        System.out.println("{\"type\":\"message\",\"partition\":" + partitionId
                + ",\"offset\":" + m.header().offset()
                + ",\"id\":\"" + m.header().id().toBigInteger() + "\""
                + ",\"timestamp\":" + m.header().timestamp()
                + ",\"payload_len\":" + payload.length + "," + body + "}");
        messages++;
    }

    private void pause(boolean empty) throws InterruptedException {
        long wait = empty ? Math.max(pollIntervalMillis, 50) : pollIntervalMillis;
        if (wait > 0) {
            Thread.sleep(wait);
        }
    }

    private static byte[] sha256(byte[] bytes) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(bytes);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --name value pairs, got " + args[i]);
            }
            options.put(args[i].substring(2), args[i + 1]);
        }
        return options;
    }

    private String need(String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required for --mode " + options.get("mode"));
        }
        return value;
    }

    private long number(String name, long fallback) {
        String value = options.get(name);
        return value == null ? fallback : Long.parseLong(value);
    }

    private static boolean isNumber(String text) {
        return !text.isEmpty() && text.chars().allMatch(Character::isDigit);
    }
}
