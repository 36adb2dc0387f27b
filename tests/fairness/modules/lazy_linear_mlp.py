# expect: loses {"MLP": ["test_has_the_default_sizes_784_256_10", "test_registers_hidden_act_output_and_computes_with_given_weights", "test_takes_its_sizes_as_keywords_and_any_batch_dimensions"]}
# message: got ['hidden: LazyLinear', 'act: ReLU', 'output: LazyLinear']
"""An MLP of LazyLinear layers (in_features left to the first forward): the contract asks for
nn.Linear `hidden` and `output` sized by the constructor, and the message must name them."""


class MLP(nn.Module):
    def __init__(self, in_features=784, hidden=256, out_features=10):
        super().__init__()
        self.hidden = nn.LazyLinear(hidden)
        self.act = nn.ReLU()
        self.output = nn.LazyLinear(out_features)

    def forward(self, x):
        return self.output(self.act(self.hidden(x)))
