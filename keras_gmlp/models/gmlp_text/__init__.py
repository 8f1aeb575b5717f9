"""gMLP and aMLP text models: the backbone, the masked LM, causal LM and
text classifier with their preprocessors, the tokenizer, the builders, and
the language-model losses and metrics."""
