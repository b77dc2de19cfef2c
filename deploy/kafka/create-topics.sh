#!/usr/bin/env bash
# Run once by compose's kafka-init job (inside the apache/kafka image) before any opledger node
# starts. Safe to re-run: existing topics keep their data, their settings are re-applied, and a
# topic with another partition count or replication factor stops everything here, because the
# partition function routes keys by the count and the nodes would refuse to start anyway.
set -euo pipefail

bootstrap=${BOOTSTRAP:-kafka-1:9092,kafka-2:9092,kafka-3:9092}
partitions=${PARTITIONS:-8}
replicas=3
bin=/opt/kafka/bin

# Both topics: delete, never compact (compaction keeps only the last record per key, i.e. per
# operation, and would erase its history); an acknowledged write is on 2 of 3 brokers; an
# out-of-date replica never becomes leader.
common="cleanup.policy=delete,min.insync.replicas=2,unclean.leader.election.enable=false"
# Events: the broker stamps the time (lease expiry and retention are judged by the log's clock,
# and several producers write each partition) and nothing ever ages out (the log is the truth).
events="$common,message.timestamp.type=LogAppendTime,retention.ms=-1,retention.bytes=-1"
# Members: one partition of node announcements (who serves which partition); stale after seconds.
members="$common,retention.ms=3600000"

ensure() { # topic, partitions, comma-separated settings
  local topic=$1 partitions=$2 settings=$3 described kv
  local -a create=() list
  IFS=, read -ra list <<<"$settings"
  for kv in "${list[@]}"; do create+=(--config "$kv"); done
  "$bin/kafka-topics.sh" --bootstrap-server "$bootstrap" --create --if-not-exists \
    --topic "$topic" --partitions "$partitions" --replication-factor "$replicas" "${create[@]}"
  "$bin/kafka-configs.sh" --bootstrap-server "$bootstrap" --alter \
    --entity-type topics --entity-name "$topic" --add-config "$settings"
  described=$("$bin/kafka-topics.sh" --bootstrap-server "$bootstrap" --describe --topic "$topic" | sed -n 1p)
  echo "$described"
  if ! grep -Eq "PartitionCount: *${partitions}[[:space:]]" <<<"$described" ||
     ! grep -Eq "ReplicationFactor: *${replicas}[[:space:]]" <<<"$described"; then
    echo "create-topics: $topic must have $partitions partitions and replication factor $replicas" >&2
    exit 1
  fi
}

ensure opledger.events "$partitions" "$events"
ensure opledger.members 1 "$members"
