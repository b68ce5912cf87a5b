"""Card Usage snippets shared by several papers (each paper's ``usage.py`` fills in what is its own)."""

from string import Template

FASHION_MNIST_CLASSIFIER = Template("""
import zoo
from zoo.common.datasets import fashion_mnist

model = zoo.load("$name", pretrained=True)
images, labels = fashion_mnist("test")  # uint8 [10000, 28, 28], as shipped (Debian dataset-fashion-mnist)
$preprocessing
ids = model.predict(images[:1])
print("prediction:", model.label_names[ids[0]], "| truth:", model.label_names[labels[0]])
""")


def fashion_mnist_classifier(name: str, preprocessing: str) -> str:
    """The snippet of a Fashion-MNIST classifier: load ``name``, predict the first test image, print it and its label.

    Args:
        name: Registry name of the entry.
        preprocessing: The comment line(s), ``# ...``, saying what ``predict`` applies for this model.
    """
    return FASHION_MNIST_CLASSIFIER.substitute(name=name, preprocessing=preprocessing)
