# fish completion for statectl. Generated from the statectl 0.1.0.dev0 command tree by `make docs`; do not edit.
# Install: copy to ~/.config/fish/completions/statectl.fish

function __statectl_commands --description 'the subcommands of a statectl command path'
    switch "$argv"
        case ''
            printf '%s\n' backup restore diff gc doctor snapshots config lease drain standby adstore
        case 'snapshots'
            printf '%s\n' list show verify copy
        case 'config'
            printf '%s\n' show
        case 'lease'
            printf '%s\n' show break
        case 'drain'
            printf '%s\n' start status wait cancel
        case 'standby'
            printf '%s\n' follow status promote failover check
        case 'adstore'
            printf '%s\n' load status versions switch
    end
end

function __statectl_value_options --description 'the options that take a value after a statectl command path'
    switch "$argv"
        case ''
            printf '%s\n' -- --config --profile --output -o
        case 'backup'
            printf '%s\n' -- --blobstore --s3-endpoint --kafka --job --job-id --task --store --state-dir --store-dir --keep-last --parallelism -j --chunk-size --ttl --grace --checkpoint-dir --config --profile --output -o
        case 'restore'
            printf '%s\n' -- --blobstore --s3-endpoint --kafka --job --job-id --task --store --state-dir --store-dir --parallelism -j --snapshot --target-dir --from-changelog --partition --until-offset --system --config --profile --output -o
        case 'diff'
            printf '%s\n' -- --blobstore --s3-endpoint --kafka --job --job-id --task --store --state-dir --store-dir --snapshot --against --config --profile --output -o
        case 'gc'
            printf '%s\n' -- --blobstore --s3-endpoint --kafka --job --job-id --keep-last --grace --parallelism -j --config --profile --output -o
        case 'doctor'
            printf '%s\n' -- --blobstore --s3-endpoint --kafka --job --job-id --state-dir --timeout --config --profile --output -o
        case 'snapshots'
            printf '%s\n' -- --config --profile --output -o
        case 'snapshots list'
            printf '%s\n' -- --blobstore --s3-endpoint --kafka --job --job-id --task --store --config --profile --output -o
        case 'snapshots show'
            printf '%s\n' -- --index-file --blobstore --s3-endpoint --kafka --job --job-id --task --store --config --profile --output -o
        case 'snapshots verify'
            printf '%s\n' -- --blobstore --s3-endpoint --kafka --job --job-id --task --store --parallelism -j --config --profile --output -o
        case 'snapshots copy'
            printf '%s\n' -- --to-job --to-job-id --to-task --to-store --to-blobstore --to-s3-endpoint --blobstore --s3-endpoint --kafka --job --job-id --task --store --parallelism -j --ttl --keep-last --grace --config --profile --output -o
        case 'config'
            printf '%s\n' -- --config --profile --output -o
        case 'config show'
            printf '%s\n' -- --blobstore --s3-endpoint --kafka --job --job-id --task --store --state-dir --parallelism -j --keep-last --config --profile --output -o
        case 'lease'
            printf '%s\n' -- --config --profile --output -o
        case 'lease show'
            printf '%s\n' -- --blobstore --s3-endpoint --job --job-id --task --store --config --profile --output -o
        case 'lease break'
            printf '%s\n' -- --blobstore --s3-endpoint --job --job-id --task --store --config --profile --output -o
        case 'drain'
            printf '%s\n' -- --config --profile --output -o
        case 'drain start'
            printf '%s\n' -- --kafka --job --job-id --run-id --config --profile --output -o
        case 'drain status'
            printf '%s\n' -- --kafka --job --job-id --run-id --config --profile --output -o
        case 'drain wait'
            printf '%s\n' -- --kafka --job --job-id --timeout --uuid --run-id --poll --config --profile --output -o
        case 'drain cancel'
            printf '%s\n' -- --kafka --job --job-id --uuid --run-id --config --profile --output -o
        case 'standby'
            printf '%s\n' -- --config --profile --output -o
        case 'standby follow'
            printf '%s\n' -- --kafka --job --job-id --task --store --state-dir --blobstore --s3-endpoint --changelog --partition --replica --replica-dir --container --layout --metrics-port --metrics-addr --config --profile --output -o
        case 'standby status'
            printf '%s\n' -- --state-dir --metrics-file --config --profile --output -o
        case 'standby promote'
            printf '%s\n' -- --kafka --job --job-id --task --store --state-dir --blobstore --s3-endpoint --changelog --partition --replica --replica-dir --container --timeout --active-dir --metrics-file --config --profile --output -o
        case 'standby failover'
            printf '%s\n' -- --kafka --job --job-id --state-dir --blobstore --s3-endpoint --container --replica --host --timeout --metrics-file --config --profile --output -o
        case 'standby check'
            printf '%s\n' -- --kafka --job --job-id --metrics-file --host --config --profile --output -o
        case 'adstore'
            printf '%s\n' -- --config --profile --output -o
        case 'adstore load'
            printf '%s\n' -- --kafka --job --job-id --task --store --state-dir --store-dir --blobstore --s3-endpoint --topic --from-file --format --tasks --partitions --key-field --value-field --extractor --key-column --value-column --value-columns --key-serde --value-serde --max-age --keep-versions --master --spark-conf --end-marker --config --profile --output -o
        case 'adstore status'
            printf '%s\n' -- --kafka --job --job-id --store --state-dir --store-dir --config --profile --output -o
        case 'adstore versions'
            printf '%s\n' -- --task --store --state-dir --store-dir --config --profile --output -o
        case 'adstore switch'
            printf '%s\n' -- --task --store --state-dir --store-dir --version --config --profile --output -o
    end
end

function __statectl_path --description 'true if the words before the cursor name this statectl command'
    set -l words (commandline -opc)
    set -e words[1]
    set -l path
    set -l skip 0
    for w in $words
        if test $skip = 1
            set skip 0
            continue
        end
        switch $w
            case --
                break
            case '-*=*'
            case '-*'
                if contains -- $w (__statectl_value_options $path)
                    set skip 1
                end
            case '*'
                if contains -- $w (__statectl_commands $path)
                    set -a path $w
                end
        end
    end
    test "$path" = "$argv"
end

complete -c statectl -f

# statectl
complete -c statectl -n '__statectl_path' -a backup -d 'Take an incremental snapshot of a RocksDB store: checkpoint it, upload only what changed, commit'
complete -c statectl -n '__statectl_path' -a restore -d 'Restore a store from its latest snapshot (or --snapshot), built aside and swapped in atomically'
complete -c statectl -n '__statectl_path' -a diff -d 'Show what differs between the local store and a snapshot, or between two snapshots'
complete -c statectl -n '__statectl_path' -a gc -d 'Finish interrupted cleanups, apply retention, delete expired and unreferenced blobs (all jobs)'
complete -c statectl -n '__statectl_path' -a doctor -d 'Check what the operations need: the blob store (reachable, credentials, writable, TTL tagging), the Kafka brokers and the job\'s checkpoint and coordinator topics, rocksdict, Java and pyspark, the state dir'
complete -c statectl -n '__statectl_path' -a snapshots -d 'List, inspect and verify snapshots'
complete -c statectl -n '__statectl_path' -a config -d 'Inspect statectl\'s settings'
complete -c statectl -n '__statectl_path' -a lease -d 'Inspect or break the lease that keeps two backups of a store from running at once'
complete -c statectl -n '__statectl_path' -a drain -d 'Stop a job after it has processed everything in flight (Samza\'s drain)'
complete -c statectl -n '__statectl_path' -a standby -d 'Hot replicas of a store kept current from its changelog, promoted in seconds'
complete -c statectl -n '__statectl_path' -a adstore -d 'Read-only (adjunct) stores filled from a topic or a file dataset, as Samza\'s side-input stores'
complete -c statectl -n '__statectl_path' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path' -l debug -d 'Tracebacks for errors'
complete -c statectl -n '__statectl_path' -l version -d 'Print the version'
complete -c statectl -n '__statectl_path' -l help -s h -d 'Show this message and exit'

# statectl backup
complete -c statectl -n '__statectl_path backup' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path backup' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path backup' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path backup' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path backup' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path backup' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path backup' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path backup' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path backup' -l store-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The store dir itself (instead of --state-dir)'
complete -c statectl -n '__statectl_path backup' -l keep-last -x -d 'Keep the last N snapshots of each task/store restorable (default 1)'
complete -c statectl -n '__statectl_path backup' -l parallelism -s j -x -d 'Transfers in flight (default 8)'
complete -c statectl -n '__statectl_path backup' -l chunk-size -x -d 'Upload files in blobs of at most this size (default 64MiB)'
complete -c statectl -n '__statectl_path backup' -l ttl -x -d 'Expiry of uncommitted blobs (default 30d)'
complete -c statectl -n '__statectl_path backup' -l grace -x -d 'Leave unreferenced blobs younger than this, and the blobs of a snapshot retention dropped this long after (default 6h; gc: at least 1m): a write in flight, or a restore that could not pin its snapshot, may still need them'
complete -c statectl -n '__statectl_path backup' -l checkpoint-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'Back up this checkpoint dir the job made (for a store a running job holds)'
complete -c statectl -n '__statectl_path backup' -l all -d 'Back up every store under --state-dir'
complete -c statectl -n '__statectl_path backup' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path backup' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path backup' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path backup' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path backup' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path backup' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path backup' -l debug -d 'Tracebacks for errors'

# statectl restore
complete -c statectl -n '__statectl_path restore' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path restore' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path restore' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path restore' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path restore' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path restore' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path restore' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path restore' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path restore' -l store-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The store dir itself (instead of --state-dir)'
complete -c statectl -n '__statectl_path restore' -l parallelism -s j -x -d 'Transfers in flight (default 8)'
complete -c statectl -n '__statectl_path restore' -l snapshot -x -d 'Snapshot id, id prefix or checkpoint id (default: the latest)'
complete -c statectl -n '__statectl_path restore' -l target-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'Restore here instead of the store dir'
complete -c statectl -n '__statectl_path restore' -l force -d 'Replace a non-empty target dir that is not a RocksDB store (never one holding a store, the blob store or a mount point)'
complete -c statectl -n '__statectl_path restore' -l from-other-store -d 'Let --snapshot name a snapshot of another job, task or store: a deliberate cross-restore'
complete -c statectl -n '__statectl_path restore' -l from-changelog -x -d 'Rebuild the store by replaying this Kafka changelog topic instead (needs --kafka and --partition)'
complete -c statectl -n '__statectl_path restore' -l partition -x -d 'The changelog partition to replay (with --from-changelog)'
complete -c statectl -n '__statectl_path restore' -l until-offset -x -d 'Replay only the records below offset N (default: to the end)'
complete -c statectl -n '__statectl_path restore' -l to-checkpoint -d 'Replay up to the changelog offset in the task\'s latest Samza checkpoint (needs --job and --store)'
complete -c statectl -n '__statectl_path restore' -l system -x -d 'The Samza system name of the changelog, for the OFFSET-v2 file written into the store (with --from-changelog)'
complete -c statectl -n '__statectl_path restore' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path restore' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path restore' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path restore' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path restore' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path restore' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path restore' -l debug -d 'Tracebacks for errors'

# statectl diff
complete -c statectl -n '__statectl_path diff' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path diff' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path diff' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path diff' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path diff' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path diff' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path diff' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path diff' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path diff' -l store-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The store dir itself (instead of --state-dir)'
complete -c statectl -n '__statectl_path diff' -l snapshot -x -d 'Snapshot to compare (default: the latest)'
complete -c statectl -n '__statectl_path diff' -l against -x -d 'Compare --snapshot with this snapshot instead of the local store'
complete -c statectl -n '__statectl_path diff' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path diff' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path diff' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path diff' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path diff' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path diff' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path diff' -l debug -d 'Tracebacks for errors'

# statectl gc
complete -c statectl -n '__statectl_path gc' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path gc' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path gc' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path gc' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path gc' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path gc' -l keep-last -x -d 'Keep the last N snapshots of each task/store restorable (default 1)'
complete -c statectl -n '__statectl_path gc' -l grace -x -d 'Leave unreferenced blobs younger than this, and the blobs of a snapshot retention dropped this long after (default 6h; gc: at least 1m): a write in flight, or a restore that could not pin its snapshot, may still need them'
complete -c statectl -n '__statectl_path gc' -l parallelism -s j -x -d 'Transfers in flight (default 8)'
complete -c statectl -n '__statectl_path gc' -l dry-run -d 'Delete nothing; list what would be deleted and why'
complete -c statectl -n '__statectl_path gc' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path gc' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path gc' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path gc' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path gc' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path gc' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path gc' -l debug -d 'Tracebacks for errors'

# statectl doctor
complete -c statectl -n '__statectl_path doctor' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path doctor' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path doctor' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path doctor' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path doctor' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path doctor' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path doctor' -l timeout -x -d 'Seconds to wait for the Kafka brokers (and for a TCP connection to the S3 endpoint) (default 5)'
complete -c statectl -n '__statectl_path doctor' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path doctor' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path doctor' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path doctor' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path doctor' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path doctor' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path doctor' -l debug -d 'Tracebacks for errors'

# statectl snapshots
complete -c statectl -n '__statectl_path snapshots' -a list -d 'List the snapshots of a task\'s store, newest first'
complete -c statectl -n '__statectl_path snapshots' -a show -d 'Show one snapshot\'s index: its metadata and files (as Samza JSON with --output json)'
complete -c statectl -n '__statectl_path snapshots' -a verify -d 'Check that every blob of a snapshot exists with the right size (and with --download, the right CRC32)'
complete -c statectl -n '__statectl_path snapshots' -a copy -d 'Clone a snapshot into a new snapshot of another job/task/store by copying every blob server-side (S3 CopyObject, also across buckets of one endpoint); between endpoints, or file:// and s3://, the blobs stream through this host (a note says so)'
complete -c statectl -n '__statectl_path snapshots' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path snapshots' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path snapshots' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path snapshots' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path snapshots' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path snapshots' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path snapshots' -l debug -d 'Tracebacks for errors'

# statectl snapshots list
complete -c statectl -n '__statectl_path snapshots list' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path snapshots list' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path snapshots list' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path snapshots list' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path snapshots list' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path snapshots list' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path snapshots list' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path snapshots list' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path snapshots list' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path snapshots list' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path snapshots list' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path snapshots list' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path snapshots list' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path snapshots list' -l debug -d 'Tracebacks for errors'

# statectl snapshots show
complete -c statectl -n '__statectl_path snapshots show' -l index-file -r -F -d 'Read the index from this file instead of the blob store'
complete -c statectl -n '__statectl_path snapshots show' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path snapshots show' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path snapshots show' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path snapshots show' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path snapshots show' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path snapshots show' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path snapshots show' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path snapshots show' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path snapshots show' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path snapshots show' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path snapshots show' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path snapshots show' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path snapshots show' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path snapshots show' -l debug -d 'Tracebacks for errors'

# statectl snapshots verify
complete -c statectl -n '__statectl_path snapshots verify' -l download -d 'Also download every blob and check each file\'s CRC32'
complete -c statectl -n '__statectl_path snapshots verify' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path snapshots verify' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path snapshots verify' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path snapshots verify' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path snapshots verify' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path snapshots verify' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path snapshots verify' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path snapshots verify' -l parallelism -s j -x -d 'Transfers in flight (default 8)'
complete -c statectl -n '__statectl_path snapshots verify' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path snapshots verify' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path snapshots verify' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path snapshots verify' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path snapshots verify' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path snapshots verify' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path snapshots verify' -l debug -d 'Tracebacks for errors'

# statectl snapshots copy
complete -c statectl -n '__statectl_path snapshots copy' -l to-job -x -d 'The target\'s job (default: --job)'
complete -c statectl -n '__statectl_path snapshots copy' -l to-job-id -x -d 'The target\'s job id (default: --job-id)'
complete -c statectl -n '__statectl_path snapshots copy' -l to-task -x -d 'The target\'s task (default: --task)'
complete -c statectl -n '__statectl_path snapshots copy' -l to-store -x -d 'The target\'s store (default: --store)'
complete -c statectl -n '__statectl_path snapshots copy' -l to-blobstore -x -d 'The target\'s blob store URL (default: --blobstore); another bucket of the same S3 endpoint still copies server-side'
complete -c statectl -n '__statectl_path snapshots copy' -l to-s3-endpoint -x -d 'The endpoint of an s3:// --to-blobstore (default: --s3-endpoint); another endpoint streams the blobs through this host'
complete -c statectl -n '__statectl_path snapshots copy' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path snapshots copy' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path snapshots copy' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path snapshots copy' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path snapshots copy' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path snapshots copy' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path snapshots copy' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path snapshots copy' -l parallelism -s j -x -d 'Transfers in flight (default 8)'
complete -c statectl -n '__statectl_path snapshots copy' -l ttl -x -d 'Expiry of uncommitted blobs (default 30d)'
complete -c statectl -n '__statectl_path snapshots copy' -l keep-last -x -d 'Keep the last N snapshots of each task/store restorable (default 1)'
complete -c statectl -n '__statectl_path snapshots copy' -l grace -x -d 'Leave unreferenced blobs younger than this, and the blobs of a snapshot retention dropped this long after (default 6h; gc: at least 1m): a write in flight, or a restore that could not pin its snapshot, may still need them'
complete -c statectl -n '__statectl_path snapshots copy' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path snapshots copy' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path snapshots copy' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path snapshots copy' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path snapshots copy' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path snapshots copy' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path snapshots copy' -l debug -d 'Tracebacks for errors'

# statectl config
complete -c statectl -n '__statectl_path config' -a show -d 'Print the effective settings and where each came from (flag, env, profile, default); secrets masked'
complete -c statectl -n '__statectl_path config' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path config' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path config' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path config' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path config' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path config' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path config' -l debug -d 'Tracebacks for errors'

# statectl config show
complete -c statectl -n '__statectl_path config show' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path config show' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path config show' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path config show' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path config show' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path config show' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path config show' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path config show' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path config show' -l parallelism -s j -x -d 'Transfers in flight (default 8)'
complete -c statectl -n '__statectl_path config show' -l keep-last -x -d 'Keep the last N snapshots of each task/store restorable (default 1)'
complete -c statectl -n '__statectl_path config show' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path config show' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path config show' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path config show' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path config show' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path config show' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path config show' -l debug -d 'Tracebacks for errors'

# statectl lease
complete -c statectl -n '__statectl_path lease' -a show -d 'Show who holds a store\'s lease, since when and until when (UTC)'
complete -c statectl -n '__statectl_path lease' -a break -d 'Release a store\'s lease left by a crashed backup, after showing its holder and asking'
complete -c statectl -n '__statectl_path lease' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path lease' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path lease' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path lease' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path lease' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path lease' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path lease' -l debug -d 'Tracebacks for errors'

# statectl lease show
complete -c statectl -n '__statectl_path lease show' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path lease show' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path lease show' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path lease show' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path lease show' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path lease show' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path lease show' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path lease show' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path lease show' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path lease show' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path lease show' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path lease show' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path lease show' -l debug -d 'Tracebacks for errors'

# statectl lease break
complete -c statectl -n '__statectl_path lease break' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path lease break' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path lease break' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path lease break' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path lease break' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path lease break' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path lease break' -l yes -s y -d 'Do not ask for confirmation'
complete -c statectl -n '__statectl_path lease break' -l force -d 'Break it even when its holder is a running process on this host'
complete -c statectl -n '__statectl_path lease break' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path lease break' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path lease break' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path lease break' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path lease break' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path lease break' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path lease break' -l debug -d 'Tracebacks for errors'

# statectl drain
complete -c statectl -n '__statectl_path drain' -a start -d 'Ask the job\'s current run to drain: write a drain notification (once: a pending one is reported)'
complete -c statectl -n '__statectl_path drain' -a status -d 'Each drain notification with its state (pending, seen, drained, cleared, stale) and how its end was found (signal: cleared or checkpoints), whether the job runs a drain monitor, the records Samza cannot read, and the messages in flight per intermediate stream partition'
complete -c statectl -n '__statectl_path drain' -a wait -d 'Block until the job has drained: the notification cleared, or its checkpoints showing the drain'
complete -c statectl -n '__statectl_path drain' -a cancel -d 'Withdraw a pending drain notification (a tombstone), unless the job already acts on it; or remove job-breaking records (--bad) or other runs\' notifications (--all-stale)'
complete -c statectl -n '__statectl_path drain' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path drain' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path drain' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path drain' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path drain' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path drain' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path drain' -l debug -d 'Tracebacks for errors'

# statectl drain start
complete -c statectl -n '__statectl_path drain start' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path drain start' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path drain start' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path drain start' -l run-id -x -d 'The run to drain (default: the job\'s app.run.id in its coordinator stream)'
complete -c statectl -n '__statectl_path drain start' -l force -d 'Write the notification even though the job\'s config does not enable its drain monitor'
complete -c statectl -n '__statectl_path drain start' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path drain start' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path drain start' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path drain start' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path drain start' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path drain start' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path drain start' -l debug -d 'Tracebacks for errors'

# statectl drain status
complete -c statectl -n '__statectl_path drain status' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path drain status' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path drain status' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path drain status' -l run-id -x -d 'The run to drain (default: the job\'s app.run.id in its coordinator stream)'
complete -c statectl -n '__statectl_path drain status' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path drain status' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path drain status' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path drain status' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path drain status' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path drain status' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path drain status' -l debug -d 'Tracebacks for errors'

# statectl drain wait
complete -c statectl -n '__statectl_path drain wait' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path drain wait' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path drain wait' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path drain wait' -l timeout -x -d 'Give up after this long (e.g'
complete -c statectl -n '__statectl_path drain wait' -l uuid -x -d 'Just this notification (default: every one of the current run)'
complete -c statectl -n '__statectl_path drain wait' -l run-id -x -d 'The run to drain (default: the job\'s app.run.id in its coordinator stream)'
complete -c statectl -n '__statectl_path drain wait' -l poll -x -d 'Seconds between looks'
complete -c statectl -n '__statectl_path drain wait' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path drain wait' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path drain wait' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path drain wait' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path drain wait' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path drain wait' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path drain wait' -l debug -d 'Tracebacks for errors'

# statectl drain cancel
complete -c statectl -n '__statectl_path drain cancel' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path drain cancel' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path drain cancel' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path drain cancel' -l uuid -x -d 'Just this notification (default: every one of the current run)'
complete -c statectl -n '__statectl_path drain cancel' -l run-id -x -d 'The run to drain (default: the job\'s app.run.id in its coordinator stream)'
complete -c statectl -n '__statectl_path drain cancel' -l bad -d 'Remove the records Samza cannot read (job-breaking)'
complete -c statectl -n '__statectl_path drain cancel' -l all-stale -d 'Remove the notifications of every other run'
complete -c statectl -n '__statectl_path drain cancel' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path drain cancel' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path drain cancel' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path drain cancel' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path drain cancel' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path drain cancel' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path drain cancel' -l debug -d 'Tracebacks for errors'

# statectl standby
complete -c statectl -n '__statectl_path standby' -a follow -d 'Keep a hot replica of a task\'s store current from its changelog (runs until stopped)'
complete -c statectl -n '__statectl_path standby' -a status -d 'The replicas under the state dir: lag, follower pid, whether they are promotable'
complete -c statectl -n '__statectl_path standby' -a promote -d 'Make a replica what the job\'s next start restores from: fence its follower, catch up, move it in'
complete -c statectl -n '__statectl_path standby' -a failover -d 'Fail a whole container over onto its standby host: locality, stop the standby, promote every store'
complete -c statectl -n '__statectl_path standby' -a check -d 'Report any task whose active and standby containers are placed on the same host (they must never be), the standby containers with no host, and where they can be placed'
complete -c statectl -n '__statectl_path standby' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path standby' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path standby' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path standby' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path standby' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path standby' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path standby' -l debug -d 'Tracebacks for errors'

# statectl standby follow
complete -c statectl -n '__statectl_path standby follow' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path standby follow' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path standby follow' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path standby follow' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path standby follow' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path standby follow' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path standby follow' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path standby follow' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path standby follow' -l changelog -x -d 'The store\'s changelog, as Samza\'s stores.<store>.changelog names it: <system>.<topic> (split at the first dot, so a topic with dots needs its system: kafka.my.topic), or a bare <topic> on the config\'s job.changelog.system, else job.default.system, else \'kafka\' (default: stores.<store>.changelog in the job\'s config on its coordinator stream)'
complete -c statectl -n '__statectl_path standby follow' -l partition -x -d 'Its changelog partition, overriding the job\'s mapping (default: the task\'s set-changelog mapping on the coordinator stream; only without one, N of a task named \'Partition N\', with a warning)'
complete -c statectl -n '__statectl_path standby follow' -l replica -x -d 'Replica number n of the standby task Standby-<task>-<n>'
complete -c statectl -n '__statectl_path standby follow' -l replica-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The replica\'s dir (default: <state-dir>/.statectl-standby/<n>/<store>/<task>, where Samza never looks; its lock and status files beside it)'
complete -c statectl -n '__statectl_path standby follow' -l container -x -d 'A container of the job (its id in the job model: an active container such as 0, or its standby container <id>-<n>): every store with a changelog of every task the coordinator stream assigns it (--store: only that store); excludes --task, --changelog, --partition and --replica-dir'
complete -c statectl -n '__statectl_path standby follow' -l layout -x -d 'standby-root: the replica in <state-dir>/.statectl-standby/<n>/<store>/<task>'
complete -c statectl -n '__statectl_path standby follow' -l to-checkpoint -d 'Apply only up to the task\'s latest checkpointed changelog offset, as checkpoints come (for a promote under Samza\'s transactional restore)'
complete -c statectl -n '__statectl_path standby follow' -l pre-restore -d 'For a job restoring the store from the blob store: instead of the changelog, keep the snapshot of the task\'s latest checkpoint restored as <state-dir>/<store>/<task>-<checkpointId>, the dir Samza\'s start reuses (only new files downloaded as snapshots land)'
complete -c statectl -n '__statectl_path standby follow' -l metrics-port -x -d 'Serve Prometheus metrics of the replica on this port (0: any free port, which a note names)'
complete -c statectl -n '__statectl_path standby follow' -l metrics-addr -x -d 'The address --metrics-port listens on: all IPv4 interfaces by default, as node_exporter\'s :9100 (Prometheus scrapes from another host); 127.0.0.1 for this host only, :: for IPv6 too'
complete -c statectl -n '__statectl_path standby follow' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path standby follow' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path standby follow' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path standby follow' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path standby follow' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path standby follow' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path standby follow' -l debug -d 'Tracebacks for errors'

# statectl standby status
complete -c statectl -n '__statectl_path standby status' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path standby status' -l metrics-file -r -F -d 'Write each replica\'s lag, offsets and follower_up to this file in Prometheus text format, for node_exporter\'s textfile collector (a *.prom file in its --collector.textfile.directory), replaced atomically'
complete -c statectl -n '__statectl_path standby status' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path standby status' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path standby status' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path standby status' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path standby status' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path standby status' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path standby status' -l debug -d 'Tracebacks for errors'

# statectl standby promote
complete -c statectl -n '__statectl_path standby promote' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path standby promote' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path standby promote' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path standby promote' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path standby promote' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path standby promote' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path standby promote' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path standby promote' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path standby promote' -l changelog -x -d 'The store\'s changelog, as Samza\'s stores.<store>.changelog names it: <system>.<topic> (split at the first dot, so a topic with dots needs its system: kafka.my.topic), or a bare <topic> on the config\'s job.changelog.system, else job.default.system, else \'kafka\' (default: stores.<store>.changelog in the job\'s config on its coordinator stream)'
complete -c statectl -n '__statectl_path standby promote' -l partition -x -d 'Its changelog partition, overriding the job\'s mapping (default: the task\'s set-changelog mapping on the coordinator stream; only without one, N of a task named \'Partition N\', with a warning)'
complete -c statectl -n '__statectl_path standby promote' -l replica -x -d 'Replica number n of the standby task Standby-<task>-<n>'
complete -c statectl -n '__statectl_path standby promote' -l replica-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The replica\'s dir (default: <state-dir>/.statectl-standby/<n>/<store>/<task>, where Samza never looks; its lock and status files beside it)'
complete -c statectl -n '__statectl_path standby promote' -l container -x -d 'A container of the job (its id in the job model: an active container such as 0, or its standby container <id>-<n>): every store with a changelog of every task the coordinator stream assigns it (--store: only that store); excludes --task, --changelog, --partition and --replica-dir'
complete -c statectl -n '__statectl_path standby promote' -l timeout -x -d 'Give up catching up after this long'
complete -c statectl -n '__statectl_path standby promote' -l to-checkpoint -d 'Catch up only to the active\'s last checkpointed changelog offset'
complete -c statectl -n '__statectl_path standby promote' -l active-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The active store dir (default: <state-dir>/<store>/<task>)'
complete -c statectl -n '__statectl_path standby promote' -l metrics-file -r -F -d 'Write the failover counters of the promotes run on this host to this file in Prometheus text format, for node_exporter\'s textfile collector (a *.prom file in its --collector.textfile.directory), replaced atomically'
complete -c statectl -n '__statectl_path standby promote' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path standby promote' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path standby promote' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path standby promote' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path standby promote' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path standby promote' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path standby promote' -l debug -d 'Tracebacks for errors'

# statectl standby failover
complete -c statectl -n '__statectl_path standby failover' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path standby failover' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path standby failover' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path standby failover' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path standby failover' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path standby failover' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path standby failover' -l container -x -d 'The active container to fail over (its id in the job model, such as 0; required)'
complete -c statectl -n '__statectl_path standby failover' -l replica -x -d 'Replica number n of the standby task Standby-<task>-<n>'
complete -c statectl -n '__statectl_path standby failover' -l host -x -d 'This host\'s name as the job\'s locality names it (default: its hostname); also the standby host when the standby container has no locality mapping'
complete -c statectl -n '__statectl_path standby failover' -l dry-run -d 'Check everything and show each step; change nothing'
complete -c statectl -n '__statectl_path standby failover' -l timeout -x -d 'Give up catching a store up after this long'
complete -c statectl -n '__statectl_path standby failover' -l to-checkpoint -d 'Catch each store up only to its task\'s last checkpointed changelog offset'
complete -c statectl -n '__statectl_path standby failover' -l metrics-file -r -F -d 'Write the failover counters of the promotes run on this host to this file in Prometheus text format, for node_exporter\'s textfile collector (a *.prom file in its --collector.textfile.directory), replaced atomically'
complete -c statectl -n '__statectl_path standby failover' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path standby failover' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path standby failover' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path standby failover' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path standby failover' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path standby failover' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path standby failover' -l debug -d 'Tracebacks for errors'

# statectl standby check
complete -c statectl -n '__statectl_path standby check' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path standby check' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path standby check' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path standby check' -l metrics-file -r -F -d 'Write the placement violations and unmapped standby containers to this file in Prometheus text format, for node_exporter\'s textfile collector (a *.prom file in its --collector.textfile.directory), replaced atomically'
complete -c statectl -n '__statectl_path standby check' -l host -x -d 'A candidate host for the standby containers\' proposals (repeatable; default: every host the job\'s locality names)'
complete -c statectl -n '__statectl_path standby check' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path standby check' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path standby check' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path standby check' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path standby check' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path standby check' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path standby check' -l debug -d 'Tracebacks for errors'

# statectl adstore
complete -c statectl -n '__statectl_path adstore' -a load -d 'Fill a read-only store from a topic (bootstrap, resume, --follow) or a file dataset (a new version)'
complete -c statectl -n '__statectl_path adstore' -a status -d 'What Samza\'s next start does with each side-input store: keep, or delete as stale or mismatched'
complete -c statectl -n '__statectl_path adstore' -a versions -d 'The sealed versions of a store loaded from files or --dataset-versions, the current one marked'
complete -c statectl -n '__statectl_path adstore' -a switch -d 'Point a store at another sealed version atomically (a rollback, or forward again)'
complete -c statectl -n '__statectl_path adstore' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path adstore' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path adstore' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path adstore' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path adstore' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path adstore' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path adstore' -l debug -d 'Tracebacks for errors'

# statectl adstore load
complete -c statectl -n '__statectl_path adstore load' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path adstore load' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path adstore load' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path adstore load' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path adstore load' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path adstore load' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path adstore load' -l store-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The store dir itself (instead of --state-dir)'
complete -c statectl -n '__statectl_path adstore load' -l blobstore -x -d 'Blob store URL: file:///path or s3://bucket/prefix'
complete -c statectl -n '__statectl_path adstore load' -l s3-endpoint -x -d 'Endpoint URL of an S3-compatible store'
complete -c statectl -n '__statectl_path adstore load' -l topic -x -d 'Fill from this topic (repeatable: one store fed by several streams, partition k of each in task k\'s store)'
complete -c statectl -n '__statectl_path adstore load' -l from-file -r -F -d 'Fill from this file or dir (Parquet, JSON lines, CSV) as a new version'
complete -c statectl -n '__statectl_path adstore load' -l format -x -d 'parquet, jsonl or csv (default: from the file names)'
complete -c statectl -n '__statectl_path adstore load' -l broadcast -d 'One store holding every partition (the store dir of --task, or --store-dir)'
complete -c statectl -n '__statectl_path adstore load' -l tasks -x -d 'With --broadcast: every one of these tasks (comma-separated) gets the store, as Samza keeps a broadcast side input, one store per task; the first is loaded, the others hard-link its files (with --job: default every task of the job)'
complete -c statectl -n '__statectl_path adstore load' -l partitions -x -d 'Topic: only these partitions (e.g'
complete -c statectl -n '__statectl_path adstore load' -l key-field -x -d 'Key: this field (a.b.c) of the JSON value (default: the record key)'
complete -c statectl -n '__statectl_path adstore load' -l value-field -x -d 'Value: this field of the JSON value (default: the whole value)'
complete -c statectl -n '__statectl_path adstore load' -l extractor -x -d 'module:callable turning a record into (key, value), or None to skip it'
complete -c statectl -n '__statectl_path adstore load' -l key-column -x -d 'Files: the key column'
complete -c statectl -n '__statectl_path adstore load' -l value-column -x -d 'Files: the value column (default: a JSON object of the other columns)'
complete -c statectl -n '__statectl_path adstore load' -l value-columns -x -d 'Files: the value as a JSON object of these columns (a,b,c)'
complete -c statectl -n '__statectl_path adstore load' -l key-serde -x -d 'Topic: the store\'s key serde (string, json, integer, long, double, byte-array, bytebuffer): the record key as Samza\'s serde reads and writes it (default: the job\'s stores.<store>.key.serde with --job, else the bytes as they are)'
complete -c statectl -n '__statectl_path adstore load' -l value-serde -x -d 'Topic: the store\'s value serde (as --key-serde; the job\'s stores.<store>.msg.serde)'
complete -c statectl -n '__statectl_path adstore load' -l follow -d 'Topic: after the bootstrap, keep applying new records until stopped'
complete -c statectl -n '__statectl_path adstore load' -l max-age -x -d 'Topic: rebuild a store whose newest file is older than this (e.g'
complete -c statectl -n '__statectl_path adstore load' -l keep-versions -x -d 'Files and --dataset-versions: versions kept per store, the current one included'
complete -c statectl -n '__statectl_path adstore load' -l allow-empty -d 'Files: make a version of a dataset without rows (refused by default: exit 1); --dataset-versions: seal a version without records (its marker is refused by default)'
complete -c statectl -n '__statectl_path adstore load' -l spark -d 'Build on Spark (the bulk path)'
complete -c statectl -n '__statectl_path adstore load' -l master -x -d 'Spark master: local[*], yarn, k8s://..., spark://..'
complete -c statectl -n '__statectl_path adstore load' -l spark-conf -x -d 'KEY=VALUE for spark-submit (repeatable)'
complete -c statectl -n '__statectl_path adstore load' -l stage-through-blobstore -d '--spark: the executors hand their SST files over through --blobstore (the default unless the master is local[...])'
complete -c statectl -n '__statectl_path adstore load' -l dataset-versions -d 'Topic: the topic carries versions of a bounded dataset, each ended by an end-of-dataset marker; each becomes a sealed version, switched to at its marker'
complete -c statectl -n '__statectl_path adstore load' -l end-marker -x -d '--dataset-versions: a marker is a record with this key (default: a record with the header statectl-end-of-dataset); its value names the dataset version'
complete -c statectl -n '__statectl_path adstore load' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path adstore load' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path adstore load' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path adstore load' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path adstore load' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path adstore load' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path adstore load' -l debug -d 'Tracebacks for errors'

# statectl adstore status
complete -c statectl -n '__statectl_path adstore status' -l kafka -x -d 'Kafka bootstrap servers (host:port[,host:port]) of the job: its checkpoint and coordinator topics, changelogs and inputs'
complete -c statectl -n '__statectl_path adstore status' -l job -x -d 'Job name'
complete -c statectl -n '__statectl_path adstore status' -l job-id -x -d 'Job id (default 1)'
complete -c statectl -n '__statectl_path adstore status' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path adstore status' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path adstore status' -l store-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The store dir itself (instead of --state-dir)'
complete -c statectl -n '__statectl_path adstore status' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path adstore status' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path adstore status' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path adstore status' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path adstore status' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path adstore status' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path adstore status' -l debug -d 'Tracebacks for errors'

# statectl adstore versions
complete -c statectl -n '__statectl_path adstore versions' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path adstore versions' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path adstore versions' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path adstore versions' -l store-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The store dir itself (instead of --state-dir)'
complete -c statectl -n '__statectl_path adstore versions' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path adstore versions' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path adstore versions' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path adstore versions' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path adstore versions' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path adstore versions' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path adstore versions' -l debug -d 'Tracebacks for errors'

# statectl adstore switch
complete -c statectl -n '__statectl_path adstore switch' -l task -x -d 'Task name (default \'Partition 0\')'
complete -c statectl -n '__statectl_path adstore switch' -l store -x -d 'Store name'
complete -c statectl -n '__statectl_path adstore switch' -l state-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The job\'s state base dir; the store dir is DIR/<store>/<task, spaces->_>'
complete -c statectl -n '__statectl_path adstore switch' -l store-dir -x -a '(__fish_complete_directories (commandline -ct))' -d 'The store dir itself (instead of --state-dir)'
complete -c statectl -n '__statectl_path adstore switch' -l version -x -d 'The version to make current (default: roll back one)'
complete -c statectl -n '__statectl_path adstore switch' -l quick -d 'Check only that the version is a store that opens, not every entry against its manifest'
complete -c statectl -n '__statectl_path adstore switch' -l help -s h -d 'Show this message and exit'
complete -c statectl -n '__statectl_path adstore switch' -l config -r -F -d 'Config file (default ./statectl.toml, then $XDG_CONFIG_HOME/statectl/config.toml)'
complete -c statectl -n '__statectl_path adstore switch' -l profile -x -d 'Profile (table) of the config file to use (default: default)'
complete -c statectl -n '__statectl_path adstore switch' -l output -s o -x -a 'text json' -d 'Result format: text or json'
complete -c statectl -n '__statectl_path adstore switch' -l verbose -s v -d 'More detail on stderr'
complete -c statectl -n '__statectl_path adstore switch' -l quiet -s q -d 'No progress or notes on stderr'
complete -c statectl -n '__statectl_path adstore switch' -l debug -d 'Tracebacks for errors'
