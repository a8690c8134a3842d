#!/usr/bin/env bash
# test_stack: the local stack of deploy/local/stack is what it promises —
# Redis with AOF (on a Redis Cluster: every node, three masters with a
# replica each, every slot served), MariaDB that lets the herald user in (and no one with a
# wrong password) with the migrated tables, and topic herald.chunks with 12
# partitions (on a three-broker stack: replicated 3 times, min.insync.replicas
# 2, every replica in sync).  Reads the stack's env file beside HERALD_TEST_CONFIG.
set -uo pipefail

[ -n "${HERALD_TEST_CONFIG:-}" ] || { echo "HERALD_TEST_CONFIG unset: skipped"; exit 77; }
env_file=$(dirname "$HERALD_TEST_CONFIG")/env
[ -r "$env_file" ] || { echo "FAIL: no $env_file beside $HERALD_TEST_CONFIG"; exit 1; }
# shellcheck source=/dev/null
. "$env_file"

failed=0
check() {  # check NAME EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then
        echo "ok: $1"
    else
        echo "FAIL: $1: expected '$2', got '$3'"
        failed=1
    fi
}

check "redis appendonly" yes "$($REDIS_CLI config get appendonly | sed -n 2p)"
check "redis appendfsync" everysec "$($REDIS_CLI config get appendfsync | sed -n 2p)"
if [ "${REDIS_CLUSTER:-0}" -eq 1 ]; then
    # stack up --redis-cluster: six nodes, every one with AOF, three masters
    # serving every slot with one replica each (docs/operations.md "Redis
    # Cluster").
    masters=0 replicas=0
    for node in $REDIS_NODES; do
        cli="redis-cli -h ${node%:*} -p ${node#*:}"
        check "redis $node appendonly" yes "$($cli config get appendonly | sed -n 2p)"
        check "redis $node cluster-node-timeout" 3000 \
            "$($cli config get cluster-node-timeout | sed -n 2p)"
        check "redis $node cluster_state" ok \
            "$($cli cluster info | tr -d '\r' | sed -n 's/^cluster_state://p')"
        case "$($cli role | head -n 1)" in
            master) masters=$((masters + 1)) ;;
            slave) replicas=$((replicas + 1)) ;;
        esac
    done
    check "redis cluster masters/replicas" "3/3" "$masters/$replicas"
    check "redis cluster slots" 16384 \
        "$($REDIS_CLI cluster info | tr -d '\r' | sed -n 's/^cluster_slots_ok://p')"
fi

check "mariadb herald user over TCP" "herald@127.0.0.1 herald" \
    "$($MYSQL -N -B -e 'SELECT CURRENT_USER(), DATABASE()' 2>&1 | tr '\t' ' ')"
check "mariadb migrated push_task" 1 \
    "$($MYSQL -N -B -e "SELECT COUNT(*) FROM information_schema.tables
                        WHERE table_schema = 'herald' AND table_name = 'push_task'" 2>&1)"
check "mariadb herald may create triggers" 1 \
    "$($MYSQL -N -B -e "SHOW GRANTS" 2>&1 | grep -c 'ALL PRIVILEGES ON `herald`\.\*')"
if ${MYSQL/-pherald/-pwrong} -e 'SELECT 1' >/dev/null 2>&1; then
    check "mariadb rejects a wrong password" rejected accepted
else
    check "mariadb rejects a wrong password" rejected rejected
fi

describe=$(kafka_topics --describe --topic herald.chunks 2>&1)
check "kafka herald.chunks partitions" 12 "$(printf '%s\n' "$describe" | grep -c 'Partition: [0-9]')"
if [ "${KAFKA_BROKERS:-1}" -eq 1 ]; then
    check "kafka herald.chunks leaders" 12 "$(printf '%s\n' "$describe" | grep -c 'Leader: 1')"
else
    # stack up --kafka-brokers 3: every partition on all three nodes, and a
    # write needs two of them (docs/operations.md "Kafka: three brokers").
    check "kafka herald.chunks replication factor" "ReplicationFactor: 3" \
        "$(printf '%s\n' "$describe" | grep -o 'ReplicationFactor: [0-9]*' | head -n 1)"
    check "kafka herald.chunks min.insync.replicas" 1 \
        "$(printf '%s\n' "$describe" | grep -c 'Configs:.*min\.insync\.replicas=2')"
    check "kafka herald.chunks partitions with 3 in-sync replicas" 12 \
        "$(printf '%s\n' "$describe" | grep -cE 'Isr: [0-9]+,[0-9]+,[0-9]+[[:space:]]')"
fi

exit "$failed"
