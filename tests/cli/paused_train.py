"""``fairseq-train`` that stops to wait after a given update: ``python paused_train.py N <fairseq-train arguments>``.

After update N it prints ``paused after update N`` on stdout and sleeps until a signal ends it, so that a test's
SIGINT or SIGTERM arrives at a known point of the run however busy the machine is (a signal sent when the log shows a
checkpoint raced the few hundred milliseconds that a tiny run needs to finish). Everything else is fairseq-train's own
``cli_main``, with the plugin loaded by ``--user-dir`` as usual.
"""

import sys
import time

from fairseq.trainer import Trainer
from fairseq_cli.train import cli_main


def pause_after(update: int) -> None:
    step = Trainer.train_step

    def train_step(self, *args, **kwargs):
        out = step(self, *args, **kwargs)
        if self.get_num_updates() == update:
            print(f"paused after update {update}", flush=True)
            # short sleeps, not one long one: the kernel may deliver the test's signal to another thread of the
            # process (torch's), and then a long sleep of the main thread is not interrupted; Python acts on the
            # pending signal (KeyboardInterrupt) at the next wake-up
            end = time.monotonic() + 600
            while time.monotonic() < end:
                time.sleep(0.05)
        return out

    Trainer.train_step = train_step


if __name__ == "__main__":
    pause_after(int(sys.argv[1]))
    sys.argv = ["fairseq-train", *sys.argv[2:]]  # the plugin's one-line notes act under fairseq-* programs
    sys.exit(cli_main())
