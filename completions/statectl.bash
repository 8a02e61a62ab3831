# bash completion for statectl                                   -*- shell-script -*-
# Generated from the statectl 0.2.0 command tree by `make docs`; do not edit.
# Install: source it from ~/.bashrc, or copy it to ~/.local/share/bash-completion/completions/statectl
# (or /etc/bash_completion.d/statectl).

# The subcommands of the command path $1 ('' for statectl itself, 'snapshots' ...), in REPLY.
_statectl_commands() {
    case $1 in
        '') REPLY='backup restore diff gc doctor rescale version snapshots config lease drain standby adstore' ;;
        'snapshots') REPLY='list show verify copy' ;;
        'config') REPLY='show' ;;
        'lease') REPLY='show break' ;;
        'drain') REPLY='start status wait cancel' ;;
        'standby') REPLY='follow status promote failover check' ;;
        'adstore') REPLY='load status seal-checkpoint versions switch' ;;
        *) REPLY='' ;;
    esac
}

# The options accepted after the command path $1, in REPLY.
_statectl_options() {
    case $1 in
        '') REPLY='--config --profile --output -o --verbose -v --quiet -q --debug --version --help -h' ;;
        'backup') REPLY='--blobstore --s3-endpoint --kafka --job --job-id --task --store --state-dir --store-dir --keep-last --parallelism -j --limit-rate --chunk-size --ttl --grace --create --sse --sse-kms-key-id --checkpoint-dir --all --all-tasks --dry-run --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'restore') REPLY='--blobstore --s3-endpoint --kafka --job --job-id --task --store --state-dir --store-dir --parallelism -j --limit-rate --snapshot --target-dir --force --from-other-store --from-changelog --partition --until-offset --to-checkpoint --system --dry-run --all --all-tasks --container --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'diff') REPLY='--blobstore --s3-endpoint --kafka --job --job-id --task --store --state-dir --store-dir --snapshot --against --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'gc') REPLY='--blobstore --s3-endpoint --kafka --job --job-id --keep-last --grace --parallelism -j --dry-run --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'doctor') REPLY='--blobstore --s3-endpoint --kafka --job --job-id --state-dir --timeout --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'rescale') REPLY='--blobstore --s3-endpoint --kafka --job --job-id --store --keep-last --parallelism -j --chunk-size --ttl --grace --from --to --to-job --master --spark-conf --partitioner --from-partitioner --task-map --snapshots --work-dir --key-groups --ignore-other-tasks --again --file-owner --dry-run --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'version') REPLY='--help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'snapshots') REPLY='--help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'snapshots list') REPLY='--blobstore --s3-endpoint --kafka --job --job-id --task --store --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'snapshots show') REPLY='--index-file --blobstore --s3-endpoint --kafka --job --job-id --task --store --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'snapshots verify') REPLY='--download --blobstore --s3-endpoint --kafka --job --job-id --task --store --parallelism -j --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'snapshots copy') REPLY='--to-job --to-job-id --to-task --to-store --to-blobstore --to-s3-endpoint --to-sse --to-sse-kms-key-id --dry-run --file-owner --all-tasks --all --blobstore --s3-endpoint --kafka --job --job-id --task --store --parallelism -j --limit-rate --ttl --keep-last --grace --create --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'config') REPLY='--help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'config show') REPLY='--blobstore --s3-endpoint --kafka --job --job-id --task --store --state-dir --parallelism -j --keep-last --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'lease') REPLY='--help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'lease show') REPLY='--blobstore --s3-endpoint --job --job-id --task --store --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'lease break') REPLY='--blobstore --s3-endpoint --job --job-id --task --store --yes -y --force --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'drain') REPLY='--help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'drain start') REPLY='--kafka --job --job-id --run-id --force --dry-run --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'drain status') REPLY='--kafka --job --job-id --run-id --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'drain wait') REPLY='--kafka --job --job-id --timeout --uuid --run-id --poll --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'drain cancel') REPLY='--kafka --job --job-id --uuid --run-id --bad --all-stale --dry-run --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'standby') REPLY='--help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'standby follow') REPLY='--kafka --job --job-id --task --store --state-dir --standby-root --zookeeper --blobstore --s3-endpoint --limit-rate --changelog --partition --replica --replica-dir --container --layout --to-checkpoint --pre-restore --metrics-port --metrics-addr --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'standby status') REPLY='--state-dir --standby-root --metrics-file --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'standby promote') REPLY='--kafka --job --job-id --task --store --state-dir --standby-root --zookeeper --blobstore --s3-endpoint --changelog --partition --replica --replica-dir --container --timeout --to-checkpoint --active-dir --metrics-file --dry-run --non-transactional-restore --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'standby failover') REPLY='--kafka --job --job-id --state-dir --standby-root --blobstore --s3-endpoint --container --replica --host --dry-run --timeout --to-checkpoint --metrics-file --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'standby check') REPLY='--kafka --job --job-id --metrics-file --host --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'adstore') REPLY='--help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'adstore load') REPLY='--kafka --zookeeper --job --job-id --task --store --state-dir --store-dir --blobstore --s3-endpoint --limit-rate --topic --from-file --format --broadcast --tasks --partitions --partition-count --key-field --value-field --value-fields --extractor --key-serde --value-serde --follow --max-age --keep-versions --allow-empty --spark --master --spark-conf --stage-through-blobstore --dataset-versions --end-marker --dry-run --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'adstore status') REPLY='--kafka --zookeeper --job --job-id --store --state-dir --store-dir --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'adstore seal-checkpoint') REPLY='--kafka --job --job-id --store --state-dir --tasks --grouper-factory --dry-run --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'adstore versions') REPLY='--task --store --state-dir --store-dir --quick --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        'adstore switch') REPLY='--task --store --state-dir --store-dir --version --quick --dry-run --help -h --config --profile --output -o --verbose -v --quiet -q --debug' ;;
        *) REPLY='' ;;
    esac
}

# How to complete the value of option $2 after command path $1, in REPLY: @file, @dir, @text
# (anything), or the words to offer; empty when $2 takes no value.
_statectl_value() {
    REPLY=''
    case $1 in
        '')
            case $2 in
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'backup')
            case $2 in
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --store-dir) REPLY='@dir' ;;
                --keep-last) REPLY='@text' ;;
                --parallelism|-j) REPLY='@text' ;;
                --limit-rate) REPLY='@text' ;;
                --chunk-size) REPLY='@text' ;;
                --ttl) REPLY='@text' ;;
                --grace) REPLY='@text' ;;
                --sse) REPLY='AES256 aws:kms' ;;
                --sse-kms-key-id) REPLY='@text' ;;
                --checkpoint-dir) REPLY='@dir' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'restore')
            case $2 in
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --store-dir) REPLY='@dir' ;;
                --parallelism|-j) REPLY='@text' ;;
                --limit-rate) REPLY='@text' ;;
                --snapshot) REPLY='@text' ;;
                --target-dir) REPLY='@dir' ;;
                --from-changelog) REPLY='@text' ;;
                --partition) REPLY='@text' ;;
                --until-offset) REPLY='@text' ;;
                --system) REPLY='@text' ;;
                --container) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'diff')
            case $2 in
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --store-dir) REPLY='@dir' ;;
                --snapshot) REPLY='@text' ;;
                --against) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'gc')
            case $2 in
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --keep-last) REPLY='@text' ;;
                --grace) REPLY='@text' ;;
                --parallelism|-j) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'doctor')
            case $2 in
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --timeout) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'rescale')
            case $2 in
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --keep-last) REPLY='@text' ;;
                --parallelism|-j) REPLY='@text' ;;
                --chunk-size) REPLY='@text' ;;
                --ttl) REPLY='@text' ;;
                --grace) REPLY='@text' ;;
                --from) REPLY='@text' ;;
                --to) REPLY='@text' ;;
                --to-job) REPLY='@text' ;;
                --master) REPLY='@text' ;;
                --spark-conf) REPLY='@text' ;;
                --partitioner) REPLY='@text' ;;
                --from-partitioner) REPLY='@text' ;;
                --task-map) REPLY='@text' ;;
                --snapshots) REPLY='@text' ;;
                --work-dir) REPLY='@dir' ;;
                --key-groups) REPLY='@text' ;;
                --file-owner) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'version')
            case $2 in
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'snapshots')
            case $2 in
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'snapshots list')
            case $2 in
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'snapshots show')
            case $2 in
                --index-file) REPLY='@file' ;;
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'snapshots verify')
            case $2 in
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --parallelism|-j) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'snapshots copy')
            case $2 in
                --to-job) REPLY='@text' ;;
                --to-job-id) REPLY='@text' ;;
                --to-task) REPLY='@text' ;;
                --to-store) REPLY='@text' ;;
                --to-blobstore) REPLY='@text' ;;
                --to-s3-endpoint) REPLY='@text' ;;
                --to-sse) REPLY='AES256 aws:kms' ;;
                --to-sse-kms-key-id) REPLY='@text' ;;
                --file-owner) REPLY='@text' ;;
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --parallelism|-j) REPLY='@text' ;;
                --limit-rate) REPLY='@text' ;;
                --ttl) REPLY='@text' ;;
                --keep-last) REPLY='@text' ;;
                --grace) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'config')
            case $2 in
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'config show')
            case $2 in
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --parallelism|-j) REPLY='@text' ;;
                --keep-last) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'lease')
            case $2 in
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'lease show')
            case $2 in
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'lease break')
            case $2 in
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'drain')
            case $2 in
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'drain start')
            case $2 in
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --run-id) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'drain status')
            case $2 in
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --run-id) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'drain wait')
            case $2 in
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --timeout) REPLY='@text' ;;
                --uuid) REPLY='@text' ;;
                --run-id) REPLY='@text' ;;
                --poll) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'drain cancel')
            case $2 in
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --uuid) REPLY='@text' ;;
                --run-id) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'standby')
            case $2 in
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'standby follow')
            case $2 in
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --standby-root) REPLY='@text' ;;
                --zookeeper) REPLY='@text' ;;
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --limit-rate) REPLY='@text' ;;
                --changelog) REPLY='@text' ;;
                --partition) REPLY='@text' ;;
                --replica) REPLY='@text' ;;
                --replica-dir) REPLY='@dir' ;;
                --container) REPLY='@text' ;;
                --layout) REPLY='standby-root active-path' ;;
                --metrics-port) REPLY='@text' ;;
                --metrics-addr) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'standby status')
            case $2 in
                --state-dir) REPLY='@dir' ;;
                --standby-root) REPLY='@text' ;;
                --metrics-file) REPLY='@file' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'standby promote')
            case $2 in
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --standby-root) REPLY='@text' ;;
                --zookeeper) REPLY='@text' ;;
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --changelog) REPLY='@text' ;;
                --partition) REPLY='@text' ;;
                --replica) REPLY='@text' ;;
                --replica-dir) REPLY='@dir' ;;
                --container) REPLY='@text' ;;
                --timeout) REPLY='@text' ;;
                --active-dir) REPLY='@dir' ;;
                --metrics-file) REPLY='@file' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'standby failover')
            case $2 in
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --standby-root) REPLY='@text' ;;
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --container) REPLY='@text' ;;
                --replica) REPLY='@text' ;;
                --host) REPLY='@text' ;;
                --timeout) REPLY='@text' ;;
                --metrics-file) REPLY='@file' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'standby check')
            case $2 in
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --metrics-file) REPLY='@file' ;;
                --host) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'adstore')
            case $2 in
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'adstore load')
            case $2 in
                --kafka) REPLY='@text' ;;
                --zookeeper) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --store-dir) REPLY='@dir' ;;
                --blobstore) REPLY='@text' ;;
                --s3-endpoint) REPLY='@text' ;;
                --limit-rate) REPLY='@text' ;;
                --topic) REPLY='@text' ;;
                --from-file) REPLY='@file' ;;
                --format) REPLY='parquet jsonl csv' ;;
                --tasks) REPLY='@text' ;;
                --partitions) REPLY='@text' ;;
                --partition-count) REPLY='@text' ;;
                --key-field) REPLY='@text' ;;
                --value-field) REPLY='@text' ;;
                --value-fields) REPLY='@text' ;;
                --extractor) REPLY='@text' ;;
                --key-serde) REPLY='string json integer long double byte bytebuffer byte-array bytes' ;;
                --value-serde) REPLY='string json integer long double byte bytebuffer byte-array bytes' ;;
                --max-age) REPLY='@text' ;;
                --keep-versions) REPLY='@text' ;;
                --master) REPLY='@text' ;;
                --spark-conf) REPLY='@text' ;;
                --end-marker) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'adstore status')
            case $2 in
                --kafka) REPLY='@text' ;;
                --zookeeper) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --store-dir) REPLY='@dir' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'adstore seal-checkpoint')
            case $2 in
                --kafka) REPLY='@text' ;;
                --job) REPLY='@text' ;;
                --job-id) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --tasks) REPLY='@text' ;;
                --grouper-factory) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'adstore versions')
            case $2 in
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --store-dir) REPLY='@dir' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
        'adstore switch')
            case $2 in
                --task) REPLY='@text' ;;
                --store) REPLY='@text' ;;
                --state-dir) REPLY='@dir' ;;
                --store-dir) REPLY='@dir' ;;
                --version) REPLY='@text' ;;
                --config) REPLY='@file' ;;
                --profile) REPLY='@text' ;;
                --output|-o) REPLY='text json' ;;
            esac ;;
    esac
}

_statectl() {
    local cur=${COMP_WORDS[COMP_CWORD]} path='' word opt='' pending=0 i REPLY
    local IFS=$' \t\n'
    COMPREPLY=()
    # Which command the words so far name, skipping option values ('--opt value', '--opt=value').
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if ((pending)); then
            [[ $word == = ]] && continue     # COMP_WORDBREAKS splits --opt=value into --opt = value
            pending=0
            continue
        fi
        case $word in
            --) break ;;
            -*=*) ;;
            -*)
                _statectl_value "$path" "$word"
                [[ -n $REPLY ]] && pending=1 opt=$word
                ;;
            *)
                _statectl_commands "$path"
                [[ " $REPLY " == *" $word "* ]] && path=${path:+$path }$word
                ;;
        esac
    done
    local prefix=''
    if ((pending)); then
        [[ $cur == = ]] && cur=''
    elif [[ $cur == --*=* ]]; then                   # --opt=val when '=' does not break words
        opt=${cur%%=*} prefix=${cur%%=*}= cur=${cur#*=}
        _statectl_value "$path" "$opt"
        [[ -n $REPLY ]] && pending=1
    fi
    if ((pending)); then
        _statectl_value "$path" "$opt"
        case $REPLY in
            @file) compopt -o filenames 2>/dev/null; IFS=$'\n' COMPREPLY=($(compgen -f -P "$prefix" -- "$cur")) ;;
            @dir) compopt -o filenames 2>/dev/null; IFS=$'\n' COMPREPLY=($(compgen -d -P "$prefix" -- "$cur")) ;;
            @text) ;;
            *) COMPREPLY=($(compgen -P "$prefix" -W "$REPLY" -- "$cur")) ;;
        esac
        return 0
    fi
    if [[ $cur == -* ]]; then
        _statectl_options "$path"
    else
        _statectl_commands "$path"
    fi
    COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))
    return 0
}

complete -F _statectl statectl
