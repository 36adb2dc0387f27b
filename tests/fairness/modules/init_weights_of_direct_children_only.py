# expect: loses {"init_weights": ["test_draws_kaiming_normal_fan_in_weights_and_zero_biases", "test_handles_bias_free_subclassed_and_grouped_layers[Conv2d(128, 256, (3, 5), groups=4)]", "test_reaches_nested_layers_and_leaves_other_modules_alone"]}
"""init_weights over model.children(): right for a flat model, but it misses nested layers and the
model itself when that is a layer."""


def init_weights(model):
    for m in model.children():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
