from django.db import models

from shop.models import Product


class Post(models.Model):
    title = models.CharField(max_length=200)
    body = models.TextField()
    published = models.BooleanField(default=False)
    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="posts")
    written = models.DateTimeField(db_index=True)
    likes = models.IntegerField(default=0)

    def __str__(self):
        return self.title
