"""A confluent-kafka client for mink's Kafka end-to-end tests
(cmd/mink/kafka_clients_e2e_test.go).

Usage: VENV/bin/python kafka_confluent.py BOOTSTRAP TOPIC GROUP PARTITIONS N M

confluent-kafka (PyPI, with the librdkafka its wheel bundles) runs the
phases a user's application goes through, printing one JSON object per line
on stdout for the test to check (logs go to stderr):

  created    the AdminClient creates TOPIC with PARTITIONS partitions
  produce1   N records from an idempotent producer (acks=all, zstd), one
             line per delivery report: the partition and offset the broker
             acknowledged, the key, value and timestamp of the report, and
             the headers sent
  consume1   a consumer of GROUP (auto.offset.reset=earliest, manual
             commits) reads until it has N records, commits, and closes;
             one line per record read
  produce2   M more records, as produce1
  consume2   a second consumer of GROUP reads until it has M records, then
             polls a while longer to show nothing else comes, commits and
             prints, after its commit, the group's committed offsets
  committed  one line per partition: the offset committed for GROUP
  watermarks one line per partition: its low and high watermark offsets
             (ListOffsets earliest and latest)
  done

Record i (0 <= i < N+M) has key "key-i" (record 1: a null key), value
"value-i;" repeated 20 times (record 2: a null value, a tombstone), headers
seq=i and bin=00 ff (i mod 256), and timestamp 1700000000000+i ms. Bytes are
printed as hex, null as null. Exits 1 with a message on stderr on any error.
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BASE_TS = 1700000000000
DEADLINE = 20.0  # seconds for each phase


def emit(phase, **fields):
    print(json.dumps({"phase": phase, **fields}), flush=True)


def fail(what):
    print(f"kafka_confluent: {what}", file=sys.stderr, flush=True)
    sys.exit(1)


def hexb(b):
    return None if b is None else b.hex()


def record(i):
    key = None if i == 1 else f"key-{i}".encode()
    value = None if i == 2 else (f"value-{i};" * 20).encode()
    headers = [("seq", str(i).encode()), ("bin", bytes([0, 255, i % 256]))]
    return key, value, headers, BASE_TS + i


def describe(phase, msg, headers=None):
    if headers is None:
        headers = msg.headers() or []
    emit(phase, partition=msg.partition(), offset=msg.offset(), key=hexb(msg.key()), value=hexb(msg.value()),
         headers=[[k, hexb(v)] for k, v in headers], timestamp=msg.timestamp()[1])


def create_topic(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=-1)],
                                  operation_timeout=15, request_timeout=15)
    try:
        futures[topic].result(timeout=DEADLINE)
    except KafkaException as e:
        fail(f"create topic {topic}: {e}")
    md = admin.list_topics(topic, timeout=DEADLINE).topics[topic]
    if md.error is not None:
        fail(f"metadata of {topic}: {md.error}")
    emit("created", partitions=len(md.partitions))


def produce(bootstrap, topic, phase, first, count):
    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "compression.type": "zstd",
        "linger.ms": 5,
    })
    errors = []
    reports = []

    # confluent-kafka's delivery reports do not reliably carry the
    # headers (confluent-kafka-python#574), so each callback is bound to
    # the headers it sent.
    def on_delivery(i, headers):
        def report(err, msg):
            if err is not None:
                errors.append(f"delivery of record {i}: {err}")
            else:
                reports.append((msg, headers))
        return report

    for i in range(first, first + count):
        key, value, headers, ts = record(i)
        p.produce(topic, key=key, value=value, headers=headers, timestamp=ts, on_delivery=on_delivery(i, headers))
        p.poll(0)
    left = p.flush(DEADLINE)
    if left:
        fail(f"{phase}: {left} records not delivered after {DEADLINE} s")
    if errors:
        fail(f"{phase}: " + "; ".join(errors))
    for msg, headers in reports:
        describe(phase, msg, headers)


def consume(bootstrap, topic, group, phase, want, partitions):
    errors = []
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "error_cb": lambda err: errors.append(err),
    })
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + DEADLINE
    while len(got) < want and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            fail(f"{phase}: consume: {msg.error()}")
        got.append(msg)
    if len(got) < want:
        fail(f"{phase}: consumed {len(got)} of {want} records in {DEADLINE} s; errors {errors}")
    # Nothing more is there to read: poll a little longer to show it.
    quiet = time.monotonic() + 1.5
    while time.monotonic() < quiet:
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg)
    for msg in got:
        describe(phase, msg)
    try:
        c.commit(asynchronous=False)
    except KafkaException as e:
        fail(f"{phase}: commit: {e}")
    if phase == "consume2":
        committed = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=DEADLINE)
        for tp in committed:
            if tp.error is not None:
                fail(f"committed offset of partition {tp.partition}: {tp.error}")
            emit("committed", partition=tp.partition, offset=tp.offset)
        for p in range(partitions):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=DEADLINE, cached=False)
            emit("watermarks", partition=p, low=low, high=high)
    c.close()


def main():
    bootstrap, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
    partitions, n, m = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    create_topic(bootstrap, topic, partitions)
    produce(bootstrap, topic, "produce1", 0, n)
    consume(bootstrap, topic, group, "consume1", n, partitions)
    produce(bootstrap, topic, "produce2", n, m)
    consume(bootstrap, topic, group, "consume2", m, partitions)
    emit("done")


if __name__ == "__main__":
    main()
