"""A tools/train.py parser as MMDetection 2.x wrote it: its own --gpus, only --local_rank.

It trains nothing: it prints what it parsed, so tests can see what reached it.
"""

import argparse
import json
import os


def parse_args():
    parser = argparse.ArgumentParser(description='Train a detector')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
    parser.add_argument('--resume-from', help='the checkpoint file to resume from')
    parser.add_argument('--no-validate', action='store_true')
    group_gpus = parser.add_mutually_exclusive_group()
    group_gpus.add_argument('--gpus', type=int)
    group_gpus.add_argument('--gpu-ids', type=int, nargs='+')
    parser.add_argument('--seed', type=int, default=None, help='random seed')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none')
    parser.add_argument('--local_rank', type=int, default=0)
    return parser.parse_args()


if __name__ == '__main__':
    args = parse_args()
    # One write per line: ranks share the pipe, and print() writes the line and its newline
    # separately, so two ranks' lines could run together.
    line = json.dumps(
        {"args": vars(args), "LOCAL_RANK": os.environ.get("LOCAL_RANK"), "WORLD_SIZE": os.environ.get("WORLD_SIZE")}
    )
    os.write(1, ("RESULT " + line + "\n").encode())
