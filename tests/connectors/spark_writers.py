"""Writers used by the Spark tests; a module of its own so that Spark's Python workers can import them."""

from __future__ import annotations

import os

from aiotimely.connectors.spark import AiotimelyForeachWriter


class FailingWriter(AiotimelyForeachWriter):
    """Fails in ``process`` for one (epoch, partition): once (a marker file remembers), or always."""

    def __init__(self, address, secret, epoch, partition, marker, always=False):
        super().__init__(address, secret)
        self.fail_at, self.marker, self.always = (epoch, partition), marker, always

    def open(self, partition_id, epoch_id):
        self.here = (epoch_id, partition_id)
        return super().open(partition_id, epoch_id)

    def process(self, row):
        if self.here == self.fail_at and (self.always or not os.path.exists(self.marker)):
            open(self.marker, "w").close()
            raise RuntimeError(f"injected failure at epoch {self.here[0]} partition {self.here[1]}")
        super().process(row)
