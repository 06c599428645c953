"""explain() on a plain torch.export program reports what lower() will do: it applies lowering's
decompositions first (batch_norm, dropout, relu_, attention are not edge ops), so it names the same
partitions and host nodes as ``lower.last_report``."""

import torch

import et_tensorrt
from et_tensorrt import explain


class ConvBlock(torch.nn.Module):
    """What resnet18 is made of: high-level ops that only exist before ExecuTorch's decompositions."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.drop = torch.nn.Dropout(0.1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.nn.functional.relu_(self.bn(self.conv(x)))
        return self.fc(self.drop(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1)))


class Attention(torch.nn.Module):
    def forward(self, q, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)  # any.dim after to_edge


def _agree(model, args, **options):
    ep = torch.export.export(model.eval(), args)
    predicted = explain(ep, **options)
    et_tensorrt.lower(ep, **options)
    lowered = et_tensorrt.lower.last_report
    assert predicted.partitions == lowered.partitions
    assert predicted.host_nodes == lowered.host_nodes
    return predicted


def test_explain_predicts_the_partitions_of_a_cnn():
    report = _agree(ConvBlock(), (torch.randn(2, 3, 8, 8),))
    assert len(report.partitions) == 1 and report.host_nodes == {}


def test_explain_predicts_the_partitions_of_decomposed_attention_and_user_exclusions():
    args = (torch.randn(1, 2, 4, 8), torch.rand(4, 4) > 0.2)
    report = _agree(Attention(), args, min_block_size=1)
    assert len(report.partitions) == 1 and report.host_nodes == {}
    report = _agree(Attention(), args, min_block_size=1, torch_executed_ops=["aten.any.dim"])
    assert {r.code for r in report.host_nodes.values()} == {"user:torch_executed_ops"}
    assert len(report.partitions) == 2
