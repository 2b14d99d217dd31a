package queues

// DefaultYAML is the queues.yaml YuniKorn runs when no configuration is
// given (yunikorn-core's DefaultSchedulerConfig): one partition, every
// namespace a queue of its own under root, created on demand and open to
// everyone. The policy's queue check and the host's audit both fall back
// to it; test/yunikorn checks it against the scheduler's own.
const DefaultYAML = `
partitions:
  - name: default
    placementrules:
      - name: tag
        value: namespace
        create: true
    queues:
      - name: root
        submitacl: '*'
`
