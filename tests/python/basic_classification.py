# TensorFlow's "Basic classification: Classify images of clothing" tutorial
# (https://www.tensorflow.org/tutorials/keras/classification), its code cells in order with
# only the import line changed (and the matplotlib cells left out: plotting is not part of
# sinter's Python API). The last lines print what tests/python/test_tutorial.py compares with
# the same script run under real Keras.

# TensorFlow and tf.keras
import sinter as tf

# Helper libraries
import numpy as np

print(tf.__version__)

fashion_mnist = tf.keras.datasets.fashion_mnist

(train_images, train_labels), (test_images, test_labels) = fashion_mnist.load_data()

class_names = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
               'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot']

train_images.shape
len(train_labels)
train_labels
test_images.shape
len(test_labels)

train_images = train_images / 255.0

test_images = test_images / 255.0

model = tf.keras.Sequential([
    tf.keras.layers.Flatten(input_shape=(28, 28)),
    tf.keras.layers.Dense(128, activation='relu'),
    tf.keras.layers.Dense(10)
])

model.compile(optimizer='adam',
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=['accuracy'])

history = model.fit(train_images, train_labels, epochs=10)

test_loss, test_acc = model.evaluate(test_images,  test_labels, verbose=2)

print('\nTest accuracy:', test_acc)

probability_model = tf.keras.Sequential([model,
                                         tf.keras.layers.Softmax()])

predictions = probability_model.predict(test_images)

predictions[0]

np.argmax(predictions[0])

test_labels[0]

# Grab an image from the test dataset.
img = test_images[1]

print(img.shape)

# Add the image to a batch where it's the only member.
img = (np.expand_dims(img,0))

print(img.shape)

predictions_single = probability_model.predict(img)

print(predictions_single)

np.argmax(predictions_single[0])

# ---- what the test compares (not part of the tutorial) ----
print("HISTORY_KEYS", sorted(history.history.keys()), list(history.history.keys()))
print("TEST_ACCURACY", float(test_acc))
print("PRED_DTYPE", predictions.dtype, predictions.shape, float(predictions[0].sum()))
print("SINGLE_ARGMAX", int(np.argmax(predictions_single[0])), int(test_labels[1]))
print("SUMMARY_BEGIN")
model.summary()
print("SUMMARY_END")
