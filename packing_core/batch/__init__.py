"""Token ids + Plan -> tensors: PackedBatch, its checks and the classic faults."""
