"""A small English corpus and tiny text configurations for the tests."""

CORPUS = [
    "The river runs past the old mill and under the stone bridge.",
    "In the morning the baker opens the shop and sells warm bread.",
    "A small boat drifts on the lake while the children watch it.",
    "The farmer walks to the field and looks at the green wheat.",
    "Rain falls on the roof of the house and the cat sleeps inside.",
    "The teacher reads a story and the class listens in silence.",
    "At night the stars shine over the hills and the town is quiet.",
    "The old man feeds the birds in the park every afternoon.",
    "A train leaves the station and crosses the long valley.",
    "The market is busy and the traders call out their prices.",
    "Snow covers the road and the cars move slowly through the town.",
    "The girl paints a picture of the sea and the white ships.",
    "The dog runs after the ball and brings it back to the boy.",
    "Wind blows through the trees and the leaves fall to the ground.",
    "The cook stirs the soup and tastes it with a wooden spoon.",
    "A letter arrives in the morning and the mother reads it aloud.",
]

TINY_TEXT = {
    "sequence_length": 16,
    "num_layers": 2,
    "hidden_dim": 8,
    "ffn_dim": 16,
}
