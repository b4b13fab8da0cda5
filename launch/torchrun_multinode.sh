#!/usr/bin/env bash
# DDP over several nodes with torchrun (bf16 and batch sizes come from the training preset).
# Run the same command on every node, with its own NODE_RANK; the arguments go to `ifir train`:
#   MASTER_ADDR=10.0.0.1 NODE_RANK=0 bash launch/torchrun_multinode.sh --data D --out R    # node 0
#   MASTER_ADDR=10.0.0.1 NODE_RANK=1 bash launch/torchrun_multinode.sh --data D --out R    # node 1
# Check first (world size = NNODES x NPROC_PER_NODE = 16 with the defaults below):
#   ifir train --dry-run --world-size 16 --launch-config launch/torchrun_multinode.sh --data D --out R
# '--' ends torchrun's options, so no `ifir train` flag is read as one of them (an abbreviation).
# R must be on storage every node sees (rank 0 writes the model; every rank reads checkpoints).
set -euo pipefail
NNODES=${NNODES:-2}
NPROC_PER_NODE=${NPROC_PER_NODE:-8}
NODE_RANK=${NODE_RANK:?set NODE_RANK to this node's index, 0 .. NNODES-1}
MASTER_ADDR=${MASTER_ADDR:?set MASTER_ADDR to node 0's address}
MASTER_PORT=${MASTER_PORT:-29500}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}

torchrun \
  --nnodes="$NNODES" \
  --nproc-per-node="$NPROC_PER_NODE" \
  --node-rank="$NODE_RANK" \
  --master-addr="$MASTER_ADDR" \
  --master-port="$MASTER_PORT" \
  -m -- ifir_lib train --preset paper "$@"
