"""Spacewalk-18's official scoring: the metrics exactly as the authors compute them (`official`), the same as a
torchmetrics Metric for training loops under DDP (`step_recognition_metric`), and the official prediction files
(`predictions`)."""
