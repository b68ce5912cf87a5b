"""The Usage snippets of the ProtoVAR cards: rendered by ``zoo card``, run as written by ``tests/test_usage.py``."""

from string import Template

from zoo.common.usage import fashion_mnist_classifier

TOKENIZER = Template("""
import zoo
from zoo.common.datasets import fashion_mnist

tokenizer = zoo.load("$name", pretrained=True)
images, _ = fashion_mnist("test")  # uint8 [10000, 28, 28] (Debian dataset-fashion-mnist)
recon = tokenizer.reconstruct(images[:500])  # encode to 85 codes per image (scales 1, 2, 4, 8), decode
mse = ((recon.float() - images[:500].astype("float32")) / 255).pow(2).mean().item()
card = zoo.get_entry("$name").metrics  # the card's test reconstruction MSE (all 10,000 images)
print(f"prediction: {mse:.4f} | truth: {card['recon_mse']:.4f} | tolerance: 0.005")
""")

GENERATOR = Template("""
import zoo

generator = zoo.load("$name", pretrained=True)  # VAR + frozen tokenizer + class prototypes for IPC 1 and 10
teacher = zoo.load("protovar.teacher", pretrained=True)
classes = [1] * 20  # 20 images of class 1 (Trouser), each following one of the 10 IPC-10 prototypes
images = generator.generate(classes, seed=0, ipc=10, index=list(range(20)))  # uint8 [20, 28, 28]
share = (teacher.predict(images) == 1).float().mean().item()  # how many the real-data teacher calls Trouser
print(f"prediction: {share:.2f} | truth: 1.00 | tolerance: 0.35")
""")

PREPROCESSING = "# predict() applies model.pretrained_cfg: pixels to [0, 1] (the network normalises them itself)"


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    if name.endswith(".teacher"):
        return fashion_mnist_classifier(name, PREPROCESSING)
    if name.endswith(".tokenizer"):
        return TOKENIZER.substitute(name=name)
    return GENERATOR.substitute(name=name)
