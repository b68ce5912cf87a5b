"""Class names and input specs of the data sets the zoo ships, with no imports: the papers' registry files read them."""

FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)  # fmt: skip

# What a Fashion-MNIST classifier that normalises inside forward takes (config.json["pretrained_cfg"]); the
# fedgr and lavid networks share it.
FASHION_MNIST_INPUT = {
    "input_format": "Fashion-MNIST-like grey images: uint8 pixels 0-255 or floats in [0, 1] (the network "
    "normalises with mean 0.2860, std 0.3530 inside forward)",
    "input_size": (1, 28, 28),
    "value_range": (0.0, 1.0),
    "label_names": FASHION_MNIST_CLASSES,
}
