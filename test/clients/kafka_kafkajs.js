// A kafkajs client for mink's Kafka end-to-end tests
// (cmd/mink/kafka_clients_e2e_test.go).
//
// Usage: NODE_PATH=DIR/node_modules node kafka_kafkajs.js BOOTSTRAP TOPIC GROUP PARTITIONS N M
//
// kafkajs (npm, pure JavaScript) runs the phases a user's application goes
// through, printing one JSON object per line on stdout for the test to
// check (kafkajs's logs go to stderr):
//
//   created    the admin client creates TOPIC with PARTITIONS partitions
//   produce1   N records from an idempotent producer (acks=-1, gzip, the
//              codec kafkajs has built in), record i to partition
//              i mod PARTITIONS, sent in several requests; one line per
//              record: partition and offset (the partition's base offset
//              in the acknowledgement plus the record's place in its
//              batch), key, value, headers, timestamp
//   consume1   a consumer of GROUP (fromBeginning, manual commits) reads
//              until it has N records, commits, and disconnects; one line
//              per record read
//   produce2   M more records, as produce1
//   consume2   a second consumer of GROUP reads until it has M records,
//              then waits a while longer to show nothing else comes,
//              and commits
//   committed  one line per partition: the group's committed offset, as
//              the admin client fetches it
//   watermarks one line per partition: its low and high watermark offsets
//              (ListOffsets earliest and latest), as the admin client
//              fetches them
//   done
//
// Record i (0 <= i < N+M) has key "key-i" (record 1: a null key), value
// "value-i;" repeated 20 times (record 2: a null value, a tombstone),
// headers seq=i and bin=00 ff (i mod 256), and timestamp 1700000000000+i
// ms. Bytes are printed as hex, null as null. Exits 1 with a message on
// stderr on any error.

'use strict'

const { Kafka, logLevel, CompressionTypes, Partitioners } = require('kafkajs')

const BASE_TS = 1700000000000
const DEADLINE_MS = 20000 // for each phase
const CHUNK = 10 // records per produce request

const [bootstrap, topic, group] = process.argv.slice(2, 5)
const [partitions, n, m] = process.argv.slice(5, 8).map(Number)

function emit (phase, fields) {
  process.stdout.write(JSON.stringify({ phase, ...fields }) + '\n')
}

function hex (b) {
  return b === null || b === undefined ? null : Buffer.from(b).toString('hex')
}

function record (i) {
  return {
    partition: i % partitions,
    key: i === 1 ? null : Buffer.from(`key-${i}`),
    value: i === 2 ? null : Buffer.from(`value-${i};`.repeat(20)),
    headers: { seq: String(i), bin: Buffer.from([0, 255, i % 256]) },
    timestamp: String(BASE_TS + i)
  }
}

function describe (phase, partition, offset, msg) {
  emit(phase, {
    partition,
    offset: Number(offset),
    key: hex(msg.key),
    value: hex(msg.value),
    headers: Object.entries(msg.headers || {}).map(([k, v]) => [k, hex(v)]),
    timestamp: Number(msg.timestamp)
  })
}

const kafka = new Kafka({
  clientId: 'mink-e2e-kafkajs',
  brokers: [bootstrap],
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, label, log }) => {
    const { message, timestamp, logger, ...extra } = log
    process.stderr.write(`kafkajs ${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
})

function withDeadline (what, promise) {
  let timer
  const deadline = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${DEADLINE_MS} ms`)), DEADLINE_MS)
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

async function createTopic (admin) {
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: partitions, replicationFactor: -1 }],
    waitForLeaders: true,
    timeout: DEADLINE_MS
  })
  if (!created) throw new Error(`create topic ${topic}: it exists already`)
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  emit('created', { partitions: md.topics[0].partitions.length })
}

async function produce (phase, first, count) {
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    // Every record names its partition; this only silences kafkajs's
    // warning that its default partitioner changed in v2.
    createPartitioner: Partitioners.DefaultPartitioner
  })
  await producer.connect()
  for (let start = first; start < first + count; start += CHUNK) {
    const messages = []
    for (let i = start; i < Math.min(start + CHUNK, first + count); i++) messages.push(record(i))
    const acks = await withDeadline(`${phase}: send`, producer.send({
      topic, acks: -1, compression: CompressionTypes.GZIP, messages
    }))
    // The acknowledgement has each partition's base offset; the records
    // of a partition are stored in the order they were sent.
    const next = new Map(acks.map(a => [a.partition, BigInt(a.baseOffset)]))
    for (const msg of messages) {
      const offset = next.get(msg.partition)
      if (offset === undefined) throw new Error(`${phase}: no acknowledgement for partition ${msg.partition}: ${JSON.stringify(acks)}`)
      next.set(msg.partition, offset + 1n)
      describe(phase, msg.partition, offset, msg)
    }
  }
  await producer.disconnect()
}

async function consume (admin, phase, want) {
  const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const got = []
  let reached
  const enough = new Promise(resolve => { reached = resolve })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      got.push({ partition, message })
      if (got.length >= want) reached()
    }
  })
  await withDeadline(`${phase}: consumed ${want} records`, enough).catch(e => {
    throw new Error(`${e.message} (got ${got.length})`)
  })
  // Nothing more is there to read: wait a little longer to show it.
  await new Promise(resolve => setTimeout(resolve, 1500))
  const next = new Map()
  for (const { partition, message } of got) {
    describe(phase, partition, message.offset, message)
    next.set(partition, (BigInt(message.offset) + 1n).toString())
  }
  await withDeadline(`${phase}: commit`, consumer.commitOffsets(
    [...next].map(([partition, offset]) => ({ topic, partition, offset }))))
  await consumer.disconnect()
  if (phase === 'consume2') {
    const committed = await admin.fetchOffsets({ groupId: group, topics: [topic] })
    for (const p of committed[0].partitions) emit('committed', { partition: p.partition, offset: Number(p.offset) })
    for (const p of await admin.fetchTopicOffsets(topic)) {
      emit('watermarks', { partition: p.partition, low: Number(p.low), high: Number(p.high) })
    }
  }
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await createTopic(admin)
  await produce('produce1', 0, n)
  await consume(admin, 'consume1', n)
  await produce('produce2', n, m)
  await consume(admin, 'consume2', m)
  await admin.disconnect()
  emit('done', {})
}

main().then(() => process.exit(0), e => {
  process.stderr.write(`kafka_kafkajs: ${e.stack || e}\n`)
  process.exit(1)
})
