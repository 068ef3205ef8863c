"""The foundation model, its autoencoder, the vertical models, their training and their metrics."""
